#pragma once
// The geometry the AMX tile kernels share (kernels/cpu/amx_tiles.h) and their scratch layouts
// (CPU_FLASH's flash_amx_layout.h, CPU_MLA's mla_amx_layout.h) are sized by: plain C++,
// included outside the ISA namespaces.

namespace attnkit::cpu {

inline constexpr int kAmxRows = 16;      // query rows per row group (a tile's rows)
inline constexpr int kAmxStepKeys = 64;  // keys per step of the kernels: four 16-key tiles
// Keys per step of CPU_MLA's key-pair path (several row groups): each output tile loaded
// serves 8 tile products per group instead of 2.
inline constexpr int kAmxPairStepKeys = 256;

}  // namespace attnkit::cpu
