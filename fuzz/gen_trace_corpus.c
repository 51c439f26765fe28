/* gen_trace_corpus.c — writes the seed corpus for fuzz_trace: one record of
 * each built-in kind, a TRACE frame holding several, and JSON-lines events.
 * Run by hand (`build/…/fuzz/gen_trace_corpus fuzz/corpus/trace`) when the
 * catalog grows; its output is committed. */
#include <stdio.h>
#include <string.h>

#include "spyglass/trace.h"
#include "spyglass/wire.h"
#include "store/store.h"

static const char *dir;

static void save(const char *name, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    return;
  }
  fwrite(p, 1, n, f);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_trace_corpus DIR\n");
    return 2;
  }
  dir = argv[1];
  static uint8_t rec[16][4096], frame[1 << 16];
  int64_t len[16];
  int k = 0;
  spy_rec_module_import mi[] = {{"b.c", "import-statement", "./b", 0}};
  const char *imp[] = {"a.c"};
  spy_rec_module mods[] = {{"a.c", 0, {mi, 1}, {NULL, 0}, 0},
                           {"b.c", 1, {NULL, 0}, {imp, 1}, 0}};
  const char *cm[] = {"a.c"};
  spy_rec_chunk_import ci[] = {{1, "dynamic-import", 0}};
  spy_rec_chunk ch[] = {{0,
                         "main",
                         SPY_TRACE_NULL_INT,
                         1,
                         0,
                         "a.c",
                         {cm, 1},
                         "entry",
                         {ci, 1},
                         0}};
  spy_rec_asset as[] = {{0, {"x\n", 2}, 2, "a.js", 0}};
  spy_rec_plugin_item pl[] = {{"p", 0, 0}};
  spy_rec_input_item in[] = {{NULL, "a.c", 0}};
  len[k] =
      spy_trace_encode(&spy_kind_session_meta,
                       &(spy_act_session_meta){
                           {in, 1}, {pl, 1}, "/w", "node", "esm", NULL, "f", 0},
                       1, 1000, 0, rec[k], 4096);
  k++;
  len[k] = spy_trace_encode(&spy_kind_module_graph_ready,
                            &(spy_act_module_graph_ready){{mods, 2}, 0}, 2,
                            1001, 1, rec[k], 4096);
  k++;
  len[k] = spy_trace_encode(&spy_kind_chunk_graph_ready,
                            &(spy_act_chunk_graph_ready){{ch, 1}, 0}, 3, 1002,
                            1, rec[k], 4096);
  k++;
  len[k] = spy_trace_encode(&spy_kind_hook_transform_call_start,
                            &(spy_act_hook_transform_call_start){
                                "a.c", {"int x;\n", 7}, "p", 0, "c1", 0},
                            4, 1003, 1, rec[k], 4096);
  k++;
  len[k] = spy_trace_encode(&spy_kind_hook_resolve_id_call_end,
                            &(spy_act_hook_resolve_id_call_end){
                                NULL, -1, "p", 0, "automatic", "c2", 0},
                            5, 1004, 1, rec[k], 4096);
  k++;
  len[k] = spy_trace_encode(&spy_kind_assets_ready,
                            &(spy_act_assets_ready){{as, 1}, 0}, 6, 1005, 1,
                            rec[k], 4096);
  k++;
  len[k] =
      spy_trace_encode(&spy_kind_build_end, NULL, 7, 1006, 1, rec[k], 4096);
  k++;
  spy_frame_writer w;
  spy_frame_start(&w, frame, sizeof frame, SPY_MSG_TRACE, 1000, 1, 0);
  spy_frame_section_begin(&w, SPY_SEC_TRACE);
  for (int i = 0; i < k; i++) {
    char name[32];
    snprintf(name, sizeof name, "record-%d", i);
    save(name, rec[i], (size_t)len[i]);
    spy_frame_put(&w, rec[i], (size_t)len[i]);
  }
  int n = spy_frame_finish(&w);
  if (n > 0)
    save("frame", frame, (size_t)n);
  spy_trace_arena a = {0};
  for (int i = 0; i < k; i++) {
    spy_trace_action act;
    if (spy_trace_decode(rec[i], (size_t)len[i], &a, &act) < 0)
      continue;
    spy__buf b = {0};
    spy__trace_json(&b, "seed", &act);
    char name[32];
    snprintf(name, sizeof name, "json-%d", i);
    save(name, b.p, b.len);
    spy__buf_free(&b);
  }
  spy_trace_arena_free(&a);
  return 0;
}
