/* trace_catalog.h — the one declaration of every built-in trace action.
 *
 * Each action kind and each nested record is declared here once, as an
 * X-macro list of fields. From these lists trace.h derives the C structs
 * and the typed emit functions, src/store/catalog.c the descriptors that
 * drive the wire encoding (docs/wire.md, TRACE), the JSON-lines form and
 * (src/store/schema.c) the SQL tables and inserts, one table per kind and
 * one child table per list of records. The kinds and field names are Rolldown's
 * devtools actions as typed by the npm package @rolldown/debug 1.2.x.
 *
 * A field is F(X, type, name, record) (X is passed through for the
 * expander's use): type is one of the SPY_TF_* suffixes
 * (STR, OSTR, SRC, OSRC, INT, OINT, BOOL, OBOOL, LIST, OLIST, STRS, OSTRS,
 * INTS; an O prefix means the field may be null), record names the nested
 * record of a LIST, `_` otherwise.
 *
 * An application declares its own kinds the same way: see
 * SPY_TRACE_DECLARE_KIND in trace.h.
 */
#ifndef SPYGLASS_TRACE_CATALOG_H
#define SPYGLASS_TRACE_CATALOG_H

// clang-format off  (one field per line reads better than packed)

/* ---- nested records ----------------------------------------------------- */
#define SPY_REC_INPUT_ITEM(F, X)                                               \
  F(X, OSTR, name, _)                                                          \
  F(X, STR, filename, _)
#define SPY_REC_PLUGIN_ITEM(F, X)                                              \
  F(X, STR, name, _)                                                           \
  F(X, INT, plugin_id, _)
#define SPY_REC_MODULE_IMPORT(F, X)                                            \
  F(X, STR, module_id, _)                                                      \
  F(X, STR, kind, _)                                                           \
  F(X, STR, module_request, _)
#define SPY_REC_MODULE(F, X)                                                   \
  F(X, STR, id, _)                                                             \
  F(X, BOOL, is_external, _)                                                   \
  F(X, OLIST, imports, module_import)                                          \
  F(X, OSTRS, importers, _)
#define SPY_REC_CHUNK_IMPORT(F, X)                                             \
  F(X, INT, chunk_id, _)                                                       \
  F(X, STR, kind, _)
#define SPY_REC_CHUNK(F, X)                                                    \
  F(X, INT, chunk_id, _)                                                       \
  F(X, OSTR, name, _)                                                          \
  F(X, OINT, advanced_chunk_group_id, _)                                       \
  F(X, BOOL, is_user_defined_entry, _)                                         \
  F(X, BOOL, is_async_entry, _)                                                \
  F(X, OSTR, entry_module, _)                                                  \
  F(X, STRS, modules, _)                                                       \
  F(X, STR, reason, _)                                                         \
  F(X, LIST, imports, chunk_import)
#define SPY_REC_ASSET(F, X)                                                    \
  F(X, OINT, chunk_id, _)                                                      \
  F(X, OSRC, content, _)                                                       \
  F(X, INT, size, _)                                                           \
  F(X, STR, filename, _)
#define SPY_REC_PACKAGE_INFO(F, X)                                             \
  F(X, STR, package_id, _)                                                     \
  F(X, OSTR, name, _)                                                          \
  F(X, OSTR, version, _)                                                       \
  F(X, STR, package_json_path, _)                                              \
  F(X, STR, package_root, _)                                                   \
  F(X, BOOL, is_used, _)                                                       \
  F(X, STR, dependency_type, _)                                                \
  F(X, INT, size, _)                                                           \
  F(X, STRS, modules, _)                                                       \
  F(X, INTS, chunk_ids, _)

/* R(snake, FIELDS), in dependency order (a record before its users). */
#define SPY_TRACE_RECORDS(R)                                                   \
  R(input_item, SPY_REC_INPUT_ITEM)                                            \
  R(plugin_item, SPY_REC_PLUGIN_ITEM)                                          \
  R(module_import, SPY_REC_MODULE_IMPORT)                                      \
  R(module, SPY_REC_MODULE)                                                    \
  R(chunk_import, SPY_REC_CHUNK_IMPORT)                                        \
  R(chunk, SPY_REC_CHUNK)                                                      \
  R(asset, SPY_REC_ASSET)                                                      \
  R(package_info, SPY_REC_PACKAGE_INFO)

/* ---- actions ------------------------------------------------------------ */
#define SPY_ACT_SESSION_META(F, X)                                             \
  F(X, LIST, inputs, input_item)                                               \
  F(X, LIST, plugins, plugin_item)                                             \
  F(X, STR, cwd, _)                                                            \
  F(X, STR, platform, _)                                                       \
  F(X, STR, format, _)                                                         \
  F(X, OSTR, dir, _)                                                           \
  F(X, OSTR, file, _)
#define SPY_ACT_NONE(F, X)
#define SPY_ACT_MODULE_GRAPH_READY(F, X) F(X, LIST, modules, module)
#define SPY_ACT_CHUNK_GRAPH_READY(F, X) F(X, LIST, chunks, chunk)
#define SPY_ACT_PACKAGE_GRAPH_READY(F, X) F(X, LIST, packages, package_info)
#define SPY_ACT_HOOK_RESOLVE_ID_CALL_START(F, X)                               \
  F(X, OSTR, importer, _)                                                      \
  F(X, STR, module_request, _)                                                 \
  F(X, STR, import_kind, _)                                                    \
  F(X, STR, plugin_name, _)                                                    \
  F(X, INT, plugin_id, _)                                                      \
  F(X, STR, trigger, _)                                                        \
  F(X, STR, call_id, _)
#define SPY_ACT_HOOK_RESOLVE_ID_CALL_END(F, X)                                 \
  F(X, OSTR, resolved_id, _)                                                   \
  F(X, OBOOL, is_external, _)                                                  \
  F(X, STR, plugin_name, _)                                                    \
  F(X, INT, plugin_id, _)                                                      \
  F(X, STR, trigger, _)                                                        \
  F(X, STR, call_id, _)
#define SPY_ACT_HOOK_LOAD_CALL_START(F, X)                                     \
  F(X, STR, module_id, _)                                                      \
  F(X, STR, plugin_name, _)                                                    \
  F(X, INT, plugin_id, _)                                                      \
  F(X, STR, call_id, _)
#define SPY_ACT_HOOK_LOAD_CALL_END(F, X)                                       \
  F(X, STR, module_id, _)                                                      \
  F(X, OSRC, content, _)                                                       \
  F(X, STR, plugin_name, _)                                                    \
  F(X, INT, plugin_id, _)                                                      \
  F(X, STR, call_id, _)
#define SPY_ACT_HOOK_TRANSFORM_CALL_START(F, X)                                \
  F(X, STR, module_id, _)                                                      \
  F(X, SRC, content, _)                                                        \
  F(X, STR, plugin_name, _)                                                    \
  F(X, INT, plugin_id, _)                                                      \
  F(X, STR, call_id, _)
#define SPY_ACT_HOOK_TRANSFORM_CALL_END(F, X)                                  \
  F(X, STR, module_id, _)                                                      \
  F(X, OSRC, content, _)                                                       \
  F(X, STR, plugin_name, _)                                                    \
  F(X, INT, plugin_id, _)                                                      \
  F(X, STR, call_id, _)
#define SPY_ACT_HOOK_RENDER_CHUNK_START(F, X)                                  \
  F(X, STR, plugin_name, _)                                                    \
  F(X, INT, plugin_id, _)                                                      \
  F(X, STR, call_id, _)                                                        \
  F(X, SRC, content, _)
#define SPY_ACT_HOOK_RENDER_CHUNK_END(F, X)                                    \
  F(X, STR, plugin_name, _)                                                    \
  F(X, INT, plugin_id, _)                                                      \
  F(X, STR, call_id, _)                                                        \
  F(X, OSRC, content, _)
#define SPY_ACT_ASSETS_READY(F, X) F(X, LIST, assets, asset)

/* A(id, Name, snake, role, FIELDS). id is the kind's number on the wire;
 * role tells the reader what the action means (build start/end, a hook's
 * start or end, the module graph, …). */
#define SPY_TRACE_ACTIONS(A)                                                   \
  A(1, SessionMeta, session_meta, SESSION, SPY_ACT_SESSION_META)               \
  A(2, BuildStart, build_start, BUILD_START, SPY_ACT_NONE)                     \
  A(3, BuildEnd, build_end, BUILD_END, SPY_ACT_NONE)                           \
  A(4, ModuleGraphReady, module_graph_ready, MODULES,                          \
    SPY_ACT_MODULE_GRAPH_READY)                                                \
  A(5, ChunkGraphReady, chunk_graph_ready, CHUNKS, SPY_ACT_CHUNK_GRAPH_READY)  \
  A(6, PackageGraphReady, package_graph_ready, NONE,                           \
    SPY_ACT_PACKAGE_GRAPH_READY)                                               \
  A(7, HookResolveIdCallStart, hook_resolve_id_call_start, HOOK_START,         \
    SPY_ACT_HOOK_RESOLVE_ID_CALL_START)                                        \
  A(8, HookResolveIdCallEnd, hook_resolve_id_call_end, HOOK_END,               \
    SPY_ACT_HOOK_RESOLVE_ID_CALL_END)                                          \
  A(9, HookLoadCallStart, hook_load_call_start, HOOK_START,                    \
    SPY_ACT_HOOK_LOAD_CALL_START)                                              \
  A(10, HookLoadCallEnd, hook_load_call_end, HOOK_END,                         \
    SPY_ACT_HOOK_LOAD_CALL_END)                                                \
  A(11, HookTransformCallStart, hook_transform_call_start, HOOK_START,         \
    SPY_ACT_HOOK_TRANSFORM_CALL_START)                                         \
  A(12, HookTransformCallEnd, hook_transform_call_end, HOOK_END,               \
    SPY_ACT_HOOK_TRANSFORM_CALL_END)                                           \
  A(13, HookRenderChunkStart, hook_render_chunk_start, HOOK_START,             \
    SPY_ACT_HOOK_RENDER_CHUNK_START)                                           \
  A(14, HookRenderChunkEnd, hook_render_chunk_end, HOOK_END,                   \
    SPY_ACT_HOOK_RENDER_CHUNK_END)                                             \
  A(15, AssetsReady, assets_ready, ASSETS, SPY_ACT_ASSETS_READY)

/* H(hook, start, end, subject): each plugin hook, the snake names of its
 * Start and End kinds (joined by call_id) and the Start field naming what
 * the hook worked on (`_`: nothing). The hook_calls view, its indexes and
 * the readers' hook type are derived from this list. */
#define SPY_TRACE_HOOKS(H)                                                     \
  H(transform, hook_transform_call_start, hook_transform_call_end, module_id)  \
  H(load, hook_load_call_start, hook_load_call_end, module_id)                 \
  H(resolve_id, hook_resolve_id_call_start, hook_resolve_id_call_end,          \
    module_request)                                                            \
  H(render_chunk, hook_render_chunk_start, hook_render_chunk_end, _)
// clang-format on

#endif
