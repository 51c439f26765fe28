/* register.c — installs the net layer into the core: the link backend as
 * this process's default remote channel backend (bus.h
 * spy_channel_set_remote) and the in-process server hook of providers
 * (provider.h spy_provider_set_listen_hook). Runs by itself when the
 * shared library is loaded; spy_net_register() does it explicitly. */
#include "spyglass/net.h"
#include "spyglass/provider.h"

static int listen_start(void **server, const char *listen, const char *token,
                        uint64_t provider_id, const char *dir) {
  spy_server_desc d = {.listen = listen,
                       .token = token,
                       .dir = dir,
                       .only_provider = provider_id};
  return spy_server_thread_start((spy_server **)server, &d);
}

static void listen_stop(void *server) { spy_server_thread_stop(server); }

static int listen_port(const void *server) { return spy_server_port(server); }

static const spy_listen_hook hook = {
    .start = listen_start, .stop = listen_stop, .port = listen_port};

void spy_net_register(void) {
  spy_channel_set_remote(spy_net_channel_ops());
  spy_provider_set_listen_hook(&hook);
}

__attribute__((constructor)) static void net_loaded(void) {
  spy_net_register();
}
