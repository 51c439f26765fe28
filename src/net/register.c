/* register.c — makes the link backend this process's default remote
 * channel backend (bus.h spy_channel_set_remote), by itself when the
 * shared library is loaded, or by an explicit spy_net_register(). */
#include "spyglass/net.h"

void spy_net_register(void) { spy_channel_set_remote(spy_net_channel_ops()); }

__attribute__((constructor)) static void net_loaded(void) {
  spy_net_register();
}
