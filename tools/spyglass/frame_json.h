/* frame_json.h — prints a decoded wire frame as one JSON object: header
 * fields and every section decoded by kind (the `decode` subcommand and the
 * debugging output of others). */
#ifndef SPY_TOOL_FRAME_JSON_H
#define SPY_TOOL_FRAME_JSON_H

#include <stddef.h>

#include "json.h"
#include "spyglass/wire.h"

/* Writes f as a JSON object (no newline). `offset` is the frame's position
 * in its stream, printed as a field. Returns 0, or a negative error if a
 * section is malformed, with *bad_off set to the byte offset within the
 * frame of the section that failed. The JSON may then be incomplete: the
 * caller decides what to do with it. */
int frame_to_json(json_out *j, const spy_frame *f, size_t offset,
                  size_t *bad_off);

#endif
