/* cmd_ls.c — `spyglass ls [--json] [--wait MS] [--dir D]`: the live
 * providers on this host, as a table or as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "discover.h"
#include "json.h"
#include "opts.h"
#include "overlay.h"
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
          "              tls://HOST:PORT for a server with TLS (CA file:\n"
          "              $SPYGLASS_CA, else the system's)\n"
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
  const cli_opt opts[] = {
      {"--connect", CLI_STR, &rem.connect, 0, 0, 0, "HOST:PORT"},
      {"--token-file", CLI_STR, &rem.token_file, 0, 0, 0, "a file"},
      {"--json", CLI_FLAG, &as_json, 0, 0, 0, NULL},
      {"--wait", CLI_INT, &wait_ms, 0, 60000, 0, "a number of milliseconds"},
      {"--dir", CLI_STR, &dir, 0, 0, 0, "a directory"},
  };
  int rc = cli_parse("ls", argc, argv, opts, sizeof opts / sizeof opts[0], NULL,
                     0, NULL, help);
  if (rc)
    return rc == 1 ? EXIT_OK : EXIT_USAGE;
  if (remote_resolve("ls", &rem) < 0)
    return EXIT_USAGE;
  void *link = NULL;
  const spy_channel_ops *ops = spy_net_channel_ops();
  if (rem.connect) {
    rc = ops->link_open(&link, rem.connect, remote_token(&rem));
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
    jw_init(&j, stdout);
    jw_obj_begin(&j);
    jw_key(&j, "providers");
    jw_arr_begin(&j);
    for (int i = 0; i < n; i++) {
      char id[17];
      snprintf(id, sizeof id, "%016llx", (unsigned long long)ps[i].info.id);
      jw_obj_begin(&j);
      jw_key(&j, "id");
      jw_str(&j, id);
      jw_key(&j, "name");
      jw_str(&j, ps[i].name);
      jw_key(&j, "kind");
      jw_str(&j, kind_name(ps[i].info.kind));
      jw_key(&j, "pid");
      jw_uint(&j, ps[i].info.pid);
      jw_key(&j, "start_ms");
      jw_uint(&j, ps[i].info.start_ms);
      jw_key(&j, "uptime_ms");
      jw_uint(&j, now > ps[i].info.start_ms ? now - ps[i].info.start_ms : 0);
      jw_key(&j, "subscribers");
      jw_uint(&j, ps[i].info.subscribers);
      jw_obj_end(&j);
    }
    jw_arr_end(&j);
    jw_obj_end(&j);
    jw_newline(&j);
  } else if (n == 0) {
    printf("no providers (waited %d ms)\n", wait_ms);
  } else {
    printf("%-16s  %-20s  %-6s  %8s  %8s  %s\n", "ID", "NAME", "KIND", "PID",
           "UPTIME", "SUBS");
    for (int i = 0; i < n; i++) {
      char up[32], name[sizeof ps[i].name];
      /* a name is the provider's to choose: no terminal escapes pass */
      snprintf(name, sizeof name, "%s", ps[i].name);
      overlay_sanitize(name, 0);
      cli_format_age(up, sizeof up,
                     now > ps[i].info.start_ms ? now - ps[i].info.start_ms : 0);
      printf("%016llx  %-20s  %-6s  %8u  %8s  %u\n",
             (unsigned long long)ps[i].info.id, name,
             kind_name(ps[i].info.kind), ps[i].info.pid, up,
             ps[i].info.subscribers);
    }
  }
  return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}
