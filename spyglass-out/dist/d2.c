/* d2/m0.c */

#include "m1.c"
int f2_0(void) { return 0; }
/* d2/m1.c */

#include "m2.c"
int f2_1(void) { return 1; }
/* d2/m10.c */

#include "m11.c"
int f2_10(void) { return 10; }
/* d2/m11.c */

#include "m12.c"
int f2_11(void) { return 11; }
/* d2/m12.c */

#include "m13.c"
int f2_12(void) { return 12; }
/* d2/m13.c */

#include "m14.c"
int f2_13(void) { return 13; }
/* d2/m14.c */

#include "m15.c"
int f2_14(void) { return 14; }
/* d2/m15.c */

#include "m16.c"
int f2_15(void) { return 15; }
/* d2/m16.c */

#include "m17.c"
int f2_16(void) { return 16; }
/* d2/m17.c */

#include "m18.c"
int f2_17(void) { return 17; }
/* d2/m18.c */

#include "m19.c"
int f2_18(void) { return 18; }
/* d2/m19.c */

#include "m20.c"
int f2_19(void) { return 19; }
/* d2/m2.c */

#include "m3.c"
int f2_2(void) { return 2; }
/* d2/m20.c */

#include "m21.c"
int f2_20(void) { return 20; }
/* d2/m21.c */

#include "m22.c"
int f2_21(void) { return 21; }
/* d2/m22.c */

#include "m23.c"
int f2_22(void) { return 22; }
/* d2/m23.c */

#include "m24.c"
int f2_23(void) { return 23; }
/* d2/m24.c */

#include "m25.c"
int f2_24(void) { return 24; }
/* d2/m25.c */

#include "m26.c"
int f2_25(void) { return 25; }
/* d2/m26.c */

#include "m27.c"
int f2_26(void) { return 26; }
/* d2/m27.c */

#include "m28.c"
int f2_27(void) { return 27; }
/* d2/m28.c */

#include "m29.c"
int f2_28(void) { return 28; }
/* d2/m29.c */

#include "m30.c"
int f2_29(void) { return 29; }
/* d2/m3.c */

#include "m4.c"
int f2_3(void) { return 3; }
/* d2/m30.c */

#include "m31.c"
int f2_30(void) { return 30; }
/* d2/m31.c */

#include "m32.c"
int f2_31(void) { return 31; }
/* d2/m32.c */

#include "m33.c"
int f2_32(void) { return 32; }
/* d2/m33.c */

#include "m34.c"
int f2_33(void) { return 33; }
/* d2/m34.c */

#include "m35.c"
int f2_34(void) { return 34; }
/* d2/m35.c */

#include "m36.c"
int f2_35(void) { return 35; }
/* d2/m36.c */

#include "m37.c"
int f2_36(void) { return 36; }
/* d2/m37.c */

#include "m38.c"
int f2_37(void) { return 37; }
/* d2/m38.c */

#include "m39.c"
int f2_38(void) { return 38; }
/* d2/m39.c */

#include "m0.c"
int f2_39(void) { return 39; }
/* d2/m4.c */

#include "m5.c"
int f2_4(void) { return 4; }
/* d2/m5.c */

#include "m6.c"
int f2_5(void) { return 5; }
/* d2/m6.c */

#include "m7.c"
int f2_6(void) { return 6; }
/* d2/m7.c */

#include "m8.c"
int f2_7(void) { return 7; }
/* d2/m8.c */

#include "m9.c"
int f2_8(void) { return 8; }
/* d2/m9.c */

#include "m10.c"
int f2_9(void) { return 9; }
