/* d3/m0.c */

#include "m1.c"
int f3_0(void) { return 0; }
/* d3/m1.c */

#include "m2.c"
int f3_1(void) { return 1; }
/* d3/m10.c */

#include "m11.c"
int f3_10(void) { return 10; }
/* d3/m11.c */

#include "m12.c"
int f3_11(void) { return 11; }
/* d3/m12.c */

#include "m13.c"
int f3_12(void) { return 12; }
/* d3/m13.c */

#include "m14.c"
int f3_13(void) { return 13; }
/* d3/m14.c */

#include "m15.c"
int f3_14(void) { return 14; }
/* d3/m15.c */

#include "m16.c"
int f3_15(void) { return 15; }
/* d3/m16.c */

#include "m17.c"
int f3_16(void) { return 16; }
/* d3/m17.c */

#include "m18.c"
int f3_17(void) { return 17; }
/* d3/m18.c */

#include "m19.c"
int f3_18(void) { return 18; }
/* d3/m19.c */

#include "m20.c"
int f3_19(void) { return 19; }
/* d3/m2.c */

#include "m3.c"
int f3_2(void) { return 2; }
/* d3/m20.c */

#include "m21.c"
int f3_20(void) { return 20; }
/* d3/m21.c */

#include "m22.c"
int f3_21(void) { return 21; }
/* d3/m22.c */

#include "m23.c"
int f3_22(void) { return 22; }
/* d3/m23.c */

#include "m24.c"
int f3_23(void) { return 23; }
/* d3/m24.c */

#include "m25.c"
int f3_24(void) { return 24; }
/* d3/m25.c */

#include "m26.c"
int f3_25(void) { return 25; }
/* d3/m26.c */

#include "m27.c"
int f3_26(void) { return 26; }
/* d3/m27.c */

#include "m28.c"
int f3_27(void) { return 27; }
/* d3/m28.c */

#include "m29.c"
int f3_28(void) { return 28; }
/* d3/m29.c */

#include "m30.c"
int f3_29(void) { return 29; }
/* d3/m3.c */

#include "m4.c"
int f3_3(void) { return 3; }
/* d3/m30.c */

#include "m31.c"
int f3_30(void) { return 30; }
/* d3/m31.c */

#include "m32.c"
int f3_31(void) { return 31; }
/* d3/m32.c */

#include "m33.c"
int f3_32(void) { return 32; }
/* d3/m33.c */

#include "m34.c"
int f3_33(void) { return 33; }
/* d3/m34.c */

#include "m35.c"
int f3_34(void) { return 34; }
/* d3/m35.c */

#include "m36.c"
int f3_35(void) { return 35; }
/* d3/m36.c */

#include "m37.c"
int f3_36(void) { return 36; }
/* d3/m37.c */

#include "m38.c"
int f3_37(void) { return 37; }
/* d3/m38.c */

#include "m39.c"
int f3_38(void) { return 38; }
/* d3/m39.c */

#include "m0.c"
int f3_39(void) { return 39; }
/* d3/m4.c */

#include "m5.c"
int f3_4(void) { return 4; }
/* d3/m5.c */

#include "m6.c"
int f3_5(void) { return 5; }
/* d3/m6.c */

#include "m7.c"
int f3_6(void) { return 6; }
/* d3/m7.c */

#include "m8.c"
int f3_7(void) { return 7; }
/* d3/m8.c */

#include "m9.c"
int f3_8(void) { return 8; }
/* d3/m9.c */

#include "m10.c"
int f3_9(void) { return 9; }
