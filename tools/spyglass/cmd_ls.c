/* cmd_ls.c — `spyglass ls [--json] [--wait MS] [--dir D]`: the live
 * providers on this host, as a table or as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "discover.h"
#include "json.h"
#include "remote.h"
#include "spyglass/net.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: spyglass ls [--json] [--wait MS] [--dir DIR]\n"
          "                   [--connect HOST:PORT [--token-file F]]\n\n"
          "Lists the live providers on this host: asks on the discovery\n"
          "channel and collects the answers for MS milliseconds (default\n"
          "300). Columns: id, name, kind (user or system), pid, uptime and\n"
          "the number of subscribers.\n\n"
          "  --json      one JSON object: {\"providers\": [...]}\n"
          "  --wait MS   how long to collect answers (0..60000)\n"
          "  --dir DIR   runtime directory (default $SPYGLASS_DIR, else\n"
          "              $XDG_RUNTIME_DIR/spyglass, else a per-user one)\n"
          "  --connect HOST:PORT  the providers of another host, through its\n"
          "              `spyglass serve` (default $SPYGLASS_CONNECT);\n"
          "                 tls://HOST:PORT for a server with TLS (CA file:\n"
          "                 $SPYGLASS_CA, else the system's)\n"
          "  --token-file F  the server's token (default $SPYGLASS_TOKEN)\n\n"
          "exit codes: 0 listed (possibly none), 1 the bus cannot be opened,\n"
          "            2 bad usage\n");
}

static const char *kind_name(uint8_t kind) {
  return kind == SPY_PROVIDER_SYSTEM ? "system" : "user";
}

int cmd_ls(int argc, char **argv) {
  int as_json = 0, wait_ms = 300;
  const char *dir = NULL;
  tool_remote rem = {0};
  for (int i = 1; i < argc; i++) {
    int ro = remote_option("ls", argc, argv, &i, &rem);
    if (ro < 0)
      return EXIT_USAGE;
    if (ro > 0)
      continue;
    if (cli_is_help(argv[i])) {
      help(stdout);
      return EXIT_OK;
    } else if (strcmp(argv[i], "--json") == 0) {
      as_json = 1;
    } else if (strcmp(argv[i], "--wait") == 0) {
      if (cli_parse_ms("ls", "--wait", ++i < argc ? argv[i] : NULL, 60000,
                       &wait_ms) < 0)
        return EXIT_USAGE;
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else {
      fprintf(stderr, "spyglass ls: unknown or incomplete option '%s'\n",
              argv[i]);
      help(stderr);
      return EXIT_USAGE;
    }
  }
  if (remote_resolve("ls", &rem) < 0)
    return EXIT_USAGE;
  void *link = NULL;
  const spy_channel_ops *ops = spy_net_channel_ops();
  if (rem.connect) {
    int rc = ops->link_open(&link, rem.connect, remote_token(&rem));
    if (rc < 0)
      return remote_fail("ls", &rem, rc);
    discover_via(ops, link);
  }
  found_provider ps[DISCOVER_MAX];
  int n = discover(dir, wait_ms, NULL, ps, DISCOVER_MAX);
  if (link) {
    discover_via(NULL, NULL);
    ops->link_close(link);
  }
  if (n < 0) {
    fprintf(stderr, "spyglass ls: cannot open the bus: %s\n", spy_strerror(n));
    return EXIT_FAIL;
  }
  uint64_t now = tool_wall_ms();
  if (as_json) {
    json_out j;
    json_init(&j, stdout);
    json_obj_begin(&j);
    json_key(&j, "providers");
    json_arr_begin(&j);
    for (int i = 0; i < n; i++) {
      char id[17];
      snprintf(id, sizeof id, "%016llx", (unsigned long long)ps[i].info.id);
      json_obj_begin(&j);
      json_key(&j, "id");
      json_str(&j, id);
      json_key(&j, "name");
      json_str(&j, ps[i].name);
      json_key(&j, "kind");
      json_str(&j, kind_name(ps[i].info.kind));
      json_key(&j, "pid");
      json_uint(&j, ps[i].info.pid);
      json_key(&j, "start_ms");
      json_uint(&j, ps[i].info.start_ms);
      json_key(&j, "uptime_ms");
      json_uint(&j, now > ps[i].info.start_ms ? now - ps[i].info.start_ms : 0);
      json_key(&j, "subscribers");
      json_uint(&j, ps[i].info.subscribers);
      json_obj_end(&j);
    }
    json_arr_end(&j);
    json_obj_end(&j);
    json_newline(&j);
  } else if (n == 0) {
    printf("no providers (waited %d ms)\n", wait_ms);
  } else {
    printf("%-16s  %-20s  %-6s  %8s  %8s  %s\n", "ID", "NAME", "KIND", "PID",
           "UPTIME", "SUBS");
    for (int i = 0; i < n; i++) {
      char up[32];
      cli_format_age(up, sizeof up,
                     now > ps[i].info.start_ms ? now - ps[i].info.start_ms : 0);
      printf("%016llx  %-20s  %-6s  %8u  %8s  %u\n",
             (unsigned long long)ps[i].info.id, ps[i].name,
             kind_name(ps[i].info.kind), ps[i].info.pid, up,
             ps[i].info.subscribers);
    }
  }
  return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}
