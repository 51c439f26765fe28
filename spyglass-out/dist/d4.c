/* d4/m0.c */

#include "m1.c"
int f4_0(void) { return 0; }
/* d4/m1.c */

#include "m2.c"
int f4_1(void) { return 1; }
/* d4/m10.c */

#include "m11.c"
int f4_10(void) { return 10; }
/* d4/m11.c */

#include "m12.c"
int f4_11(void) { return 11; }
/* d4/m12.c */

#include "m13.c"
int f4_12(void) { return 12; }
/* d4/m13.c */

#include "m14.c"
int f4_13(void) { return 13; }
/* d4/m14.c */

#include "m15.c"
int f4_14(void) { return 14; }
/* d4/m15.c */

#include "m16.c"
int f4_15(void) { return 15; }
/* d4/m16.c */

#include "m17.c"
int f4_16(void) { return 16; }
/* d4/m17.c */

#include "m18.c"
int f4_17(void) { return 17; }
/* d4/m18.c */

#include "m19.c"
int f4_18(void) { return 18; }
/* d4/m19.c */

#include "m20.c"
int f4_19(void) { return 19; }
/* d4/m2.c */

#include "m3.c"
int f4_2(void) { return 2; }
/* d4/m20.c */

#include "m21.c"
int f4_20(void) { return 20; }
/* d4/m21.c */

#include "m22.c"
int f4_21(void) { return 21; }
/* d4/m22.c */

#include "m23.c"
int f4_22(void) { return 22; }
/* d4/m23.c */

#include "m24.c"
int f4_23(void) { return 23; }
/* d4/m24.c */

#include "m25.c"
int f4_24(void) { return 24; }
/* d4/m25.c */

#include "m26.c"
int f4_25(void) { return 25; }
/* d4/m26.c */

#include "m27.c"
int f4_26(void) { return 26; }
/* d4/m27.c */

#include "m28.c"
int f4_27(void) { return 27; }
/* d4/m28.c */

#include "m29.c"
int f4_28(void) { return 28; }
/* d4/m29.c */

#include "m30.c"
int f4_29(void) { return 29; }
/* d4/m3.c */

#include "m4.c"
int f4_3(void) { return 3; }
/* d4/m30.c */

#include "m31.c"
int f4_30(void) { return 30; }
/* d4/m31.c */

#include "m32.c"
int f4_31(void) { return 31; }
/* d4/m32.c */

#include "m33.c"
int f4_32(void) { return 32; }
/* d4/m33.c */

#include "m34.c"
int f4_33(void) { return 33; }
/* d4/m34.c */

#include "m35.c"
int f4_34(void) { return 34; }
/* d4/m35.c */

#include "m36.c"
int f4_35(void) { return 35; }
/* d4/m36.c */

#include "m37.c"
int f4_36(void) { return 36; }
/* d4/m37.c */

#include "m38.c"
int f4_37(void) { return 37; }
/* d4/m38.c */

#include "m39.c"
int f4_38(void) { return 38; }
/* d4/m39.c */

#include "m0.c"
int f4_39(void) { return 39; }
/* d4/m4.c */

#include "m5.c"
int f4_4(void) { return 4; }
/* d4/m5.c */

#include "m6.c"
int f4_5(void) { return 5; }
/* d4/m6.c */

#include "m7.c"
int f4_6(void) { return 6; }
/* d4/m7.c */

#include "m8.c"
int f4_7(void) { return 7; }
/* d4/m8.c */

#include "m9.c"
int f4_8(void) { return 8; }
/* d4/m9.c */

#include "m10.c"
int f4_9(void) { return 9; }
