/* d0/m0.c */

#include "m1.c"
int f0_0(void) { return 0; }
/* d0/m1.c */

#include "m2.c"
int f0_1(void) { return 1; }
/* d0/m10.c */

#include "m11.c"
int f0_10(void) { return 10; }
/* d0/m11.c */

#include "m12.c"
int f0_11(void) { return 11; }
/* d0/m12.c */

#include "m13.c"
int f0_12(void) { return 12; }
/* d0/m13.c */

#include "m14.c"
int f0_13(void) { return 13; }
/* d0/m14.c */

#include "m15.c"
int f0_14(void) { return 14; }
/* d0/m15.c */

#include "m16.c"
int f0_15(void) { return 15; }
/* d0/m16.c */

#include "m17.c"
int f0_16(void) { return 16; }
/* d0/m17.c */

#include "m18.c"
int f0_17(void) { return 17; }
/* d0/m18.c */

#include "m19.c"
int f0_18(void) { return 18; }
/* d0/m19.c */

#include "m20.c"
int f0_19(void) { return 19; }
/* d0/m2.c */

#include "m3.c"
int f0_2(void) { return 2; }
/* d0/m20.c */

#include "m21.c"
int f0_20(void) { return 20; }
/* d0/m21.c */

#include "m22.c"
int f0_21(void) { return 21; }
/* d0/m22.c */

#include "m23.c"
int f0_22(void) { return 22; }
/* d0/m23.c */

#include "m24.c"
int f0_23(void) { return 23; }
/* d0/m24.c */

#include "m25.c"
int f0_24(void) { return 24; }
/* d0/m25.c */

#include "m26.c"
int f0_25(void) { return 25; }
/* d0/m26.c */

#include "m27.c"
int f0_26(void) { return 26; }
/* d0/m27.c */

#include "m28.c"
int f0_27(void) { return 27; }
/* d0/m28.c */

#include "m29.c"
int f0_28(void) { return 28; }
/* d0/m29.c */

#include "m30.c"
int f0_29(void) { return 29; }
/* d0/m3.c */

#include "m4.c"
int f0_3(void) { return 3; }
/* d0/m30.c */

#include "m31.c"
int f0_30(void) { return 30; }
/* d0/m31.c */

#include "m32.c"
int f0_31(void) { return 31; }
/* d0/m32.c */

#include "m33.c"
int f0_32(void) { return 32; }
/* d0/m33.c */

#include "m34.c"
int f0_33(void) { return 33; }
/* d0/m34.c */

#include "m35.c"
int f0_34(void) { return 34; }
/* d0/m35.c */

#include "m36.c"
int f0_35(void) { return 35; }
/* d0/m36.c */

#include "m37.c"
int f0_36(void) { return 36; }
/* d0/m37.c */

#include "m38.c"
int f0_37(void) { return 37; }
/* d0/m38.c */

#include "m39.c"
int f0_38(void) { return 38; }
/* d0/m39.c */

#include "m0.c"
int f0_39(void) { return 39; }
/* d0/m4.c */

#include "m5.c"
int f0_4(void) { return 4; }
/* d0/m5.c */

#include "m6.c"
int f0_5(void) { return 5; }
/* d0/m6.c */

#include "m7.c"
int f0_6(void) { return 6; }
/* d0/m7.c */

#include "m8.c"
int f0_7(void) { return 7; }
/* d0/m8.c */

#include "m9.c"
int f0_8(void) { return 8; }
/* d0/m9.c */

#include "m10.c"
int f0_9(void) { return 9; }
