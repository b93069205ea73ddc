#pragma once
// Every system and core header the per-ISA kernel files need, included BEFORE their target
// region (target_begin.h): code defined in these headers must stay compiled for the
// baseline ISA (it may be shared with other translation units), and the kernel headers
// included inside the ISA namespace rely on these being included already. A backend's
// per-ISA file includes its own headers (plan, entry points) itself, also before the region.

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "attnkit/core/enums.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/kernels/paged_attention_params.h"
#include "kernels/cpu/kv_tags.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/thread_scratch.h"
