/* An embedding example built against an installed spyglass. */
#include <spyglass/spyglass.h>
#include <stdio.h>

int main(void) {
  unsigned char buf[64];
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_PING, 0, 1, 0);
  int n = spy_frame_finish(&w);
  spy_frame f;
  int rc = spy_frame_decode(buf, (size_t)n, &f, NULL);
  printf("spyglass %s: %s frame of %d bytes: %s\n", SPY_VERSION_STRING,
         spy_msg_type_name(f.type), n, spy_strerror(rc));
  return rc == 0 ? 0 : 1;
}
