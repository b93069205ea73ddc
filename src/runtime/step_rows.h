#pragma once
// The rows of one forward call and how they are filled from the QkvGenerator.
//
// A step has up to three row lists:
//   decoder rows  one per new token of the step, in batch order (query_start_loc order):
//                 the queries of decoder, encoder-only and cross-attention layers, and the
//                 fresh K/V of decoder and encoder-only layers;
//   encoder rows  one per encoder token of each request encoded this step, in batch order:
//                 the Q/K/V of encoder layers, and the K/V cross attention caches.
// Tensors are [rows, heads, dim] row-major in the compute dtype.

#include <span>
#include <vector>

#include "attnkit/core/tensor.h"
#include "attnkit/runtime/qkv_generator.h"

namespace attnkit {

struct StepRow {
  int request = 0;
  int position = 0;     // in the row's token source
  int seq_end = 0;      // tokens of the sequence once this step's are added
  int encoder_len = 0;  // of the request (cross attention keys)
};

// A [rows.size(), heads, dim] tensor of `stream` values of `layer`.
HostTensor generate_rows(const QkvGenerator& gen, QkvStream stream, TokenSource source, int layer,
                         std::span<const StepRow> rows, int heads, int dim);

// Row `row` of a [rows, heads * dim] output, as floats.
std::vector<float> read_row(const TensorView& output, int row);

}  // namespace attnkit
