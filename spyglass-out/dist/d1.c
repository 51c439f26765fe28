/* d1/m0.c */

#include "m1.c"
int f1_0(void) { return 0; }
/* d1/m1.c */

#include "m2.c"
int f1_1(void) { return 1; }
/* d1/m10.c */

#include "m11.c"
int f1_10(void) { return 10; }
/* d1/m11.c */

#include "m12.c"
int f1_11(void) { return 11; }
/* d1/m12.c */

#include "m13.c"
int f1_12(void) { return 12; }
/* d1/m13.c */

#include "m14.c"
int f1_13(void) { return 13; }
/* d1/m14.c */

#include "m15.c"
int f1_14(void) { return 14; }
/* d1/m15.c */

#include "m16.c"
int f1_15(void) { return 15; }
/* d1/m16.c */

#include "m17.c"
int f1_16(void) { return 16; }
/* d1/m17.c */

#include "m18.c"
int f1_17(void) { return 17; }
/* d1/m18.c */

#include "m19.c"
int f1_18(void) { return 18; }
/* d1/m19.c */

#include "m20.c"
int f1_19(void) { return 19; }
/* d1/m2.c */

#include "m3.c"
int f1_2(void) { return 2; }
/* d1/m20.c */

#include "m21.c"
int f1_20(void) { return 20; }
/* d1/m21.c */

#include "m22.c"
int f1_21(void) { return 21; }
/* d1/m22.c */

#include "m23.c"
int f1_22(void) { return 22; }
/* d1/m23.c */

#include "m24.c"
int f1_23(void) { return 23; }
/* d1/m24.c */

#include "m25.c"
int f1_24(void) { return 24; }
/* d1/m25.c */

#include "m26.c"
int f1_25(void) { return 25; }
/* d1/m26.c */

#include "m27.c"
int f1_26(void) { return 26; }
/* d1/m27.c */

#include "m28.c"
int f1_27(void) { return 27; }
/* d1/m28.c */

#include "m29.c"
int f1_28(void) { return 28; }
/* d1/m29.c */

#include "m30.c"
int f1_29(void) { return 29; }
/* d1/m3.c */

#include "m4.c"
int f1_3(void) { return 3; }
/* d1/m30.c */

#include "m31.c"
int f1_30(void) { return 30; }
/* d1/m31.c */

#include "m32.c"
int f1_31(void) { return 31; }
/* d1/m32.c */

#include "m33.c"
int f1_32(void) { return 32; }
/* d1/m33.c */

#include "m34.c"
int f1_33(void) { return 33; }
/* d1/m34.c */

#include "m35.c"
int f1_34(void) { return 34; }
/* d1/m35.c */

#include "m36.c"
int f1_35(void) { return 35; }
/* d1/m36.c */

#include "m37.c"
int f1_36(void) { return 36; }
/* d1/m37.c */

#include "m38.c"
int f1_37(void) { return 37; }
/* d1/m38.c */

#include "m39.c"
int f1_38(void) { return 38; }
/* d1/m39.c */

#include "m0.c"
int f1_39(void) { return 39; }
/* d1/m4.c */

#include "m5.c"
int f1_4(void) { return 4; }
/* d1/m5.c */

#include "m6.c"
int f1_5(void) { return 5; }
/* d1/m6.c */

#include "m7.c"
int f1_6(void) { return 6; }
/* d1/m7.c */

#include "m8.c"
int f1_7(void) { return 7; }
/* d1/m8.c */

#include "m9.c"
int f1_8(void) { return 8; }
/* d1/m9.c */

#include "m10.c"
int f1_9(void) { return 9; }
