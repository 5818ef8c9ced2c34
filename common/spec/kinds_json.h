#pragma once
// The task kinds' descriptors (kinds.h) as JSON, as GET /api/v1/kinds serves them to the
// console, kinds in the palette's order:
//
//   {"kinds": [{"kind": "pytorch", "label": "PyTorch", "framework": true,
//               "fields": ["mode", "roles", ...],
//               "modes": [{"mode": "master-worker", "default": true, "elastic": false,
//                          "roles": [{"role": "master", "required": true, "min": 1, "max": 1}, ...],
//                          "rule": "", "success": "the master replica exits 0"}, ...]}, ...]}
//
// "max" is null when unbounded; "rule" is "" when the mode has no extra combination rule;
// a kind without modes has one mode, "mode": "".

#include "common/util/json.h"

namespace yard::spec {

Json kindsJson();

}  // namespace yard::spec
