#include "attnkit/core/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace attnkit {
namespace {

using ::testing::HasSubstr;

TEST(TensorView, ContiguousShapeStridesAndNumel) {
  std::vector<float> data(2 * 3 * 4);
  const TensorView v = TensorView::contiguous(data.data(), ScalarType::kFloat32, {2, 3, 4});
  EXPECT_EQ(v.ndim, 3);
  EXPECT_EQ(v.size(0), 2);
  EXPECT_EQ(v.size(2), 4);
  EXPECT_EQ(v.stride(0), 12);
  EXPECT_EQ(v.stride(1), 4);
  EXPECT_EQ(v.stride(2), 1);
  EXPECT_EQ(v.numel(), 24);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_FALSE(v.empty());
  EXPECT_EQ(v.data_as<float>(), data.data());
  EXPECT_EQ(v.describe(), "float32[2, 3, 4] strides [12, 4, 1] on cpu");
  EXPECT_TRUE(TensorView{}.empty());
}

TEST(TensorView, TransposedViewIsNotContiguous) {
  std::vector<float> data(6);
  TensorView v = TensorView::contiguous(data.data(), ScalarType::kFloat32, {2, 3});
  std::swap(v.shape[0], v.shape[1]);
  std::swap(v.strides[0], v.strides[1]);
  EXPECT_FALSE(v.is_contiguous());
  // Size-1 dimensions do not break contiguity whatever their stride.
  TensorView one = TensorView::contiguous(data.data(), ScalarType::kFloat32, {1, 6});
  one.strides[0] = 999;
  EXPECT_TRUE(one.is_contiguous());
}

TEST(TensorView, RankAboveTheMaximumIsAnError) {
  float x = 0;
  try {
    TensorView::contiguous(&x, ScalarType::kFloat32, {1, 1, 1, 1, 1, 1, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "tensor rank 7 exceeds the maximum of 6");
  }
}

void expect_same_view(const TensorView& a, const TensorView& b) {
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.device, b.device);
  ASSERT_EQ(a.ndim, b.ndim);
  for (int d = 0; d < a.ndim; ++d) {
    EXPECT_EQ(a.size(d), b.size(d)) << d;
    EXPECT_EQ(a.stride(d), b.stride(d)) << d;
  }
}

TEST(DLPack, RoundTripKeepsEveryFieldForEachDtype) {
  struct Case {
    ScalarType type;
    uint8_t code;
    uint8_t bits;
  };
  alignas(64) unsigned char buffer[4 * 5 * 8 * 8];
  for (const Case& c :
       {Case{ScalarType::kFloat32, kDLFloat, 32}, Case{ScalarType::kFloat16, kDLFloat, 16},
        Case{ScalarType::kBFloat16, kDLBfloat, 16}, Case{ScalarType::kInt32, kDLInt, 32},
        Case{ScalarType::kInt64, kDLInt, 64}, Case{ScalarType::kUInt8, kDLUInt, 8}}) {
    const TensorView view = TensorView::contiguous(buffer, c.type, {4, 5, 8});
    DLTensor dl{};
    to_dlpack(view, dl);
    EXPECT_EQ(dl.data, buffer);
    EXPECT_EQ(dl.device.device_type, kDLCPU);
    EXPECT_EQ(dl.ndim, 3);
    EXPECT_EQ(dl.dtype.code, c.code) << to_string(c.type);
    EXPECT_EQ(dl.dtype.bits, c.bits) << to_string(c.type);
    EXPECT_EQ(dl.dtype.lanes, 1);
    EXPECT_EQ(dl.shape[1], 5);
    EXPECT_EQ(dl.strides[0], 40);
    EXPECT_EQ(dl.byte_offset, 0u);
    expect_same_view(from_dlpack(dl), view);
  }
}

TEST(DLPack, RoundTripKeepsStridesAndCudaDevice) {
  float data[24];
  TensorView view =
      TensorView::contiguous(data, ScalarType::kFloat32, {2, 3, 4}, Device{DeviceType::kCuda, 3});
  std::swap(view.shape[0], view.shape[2]);
  std::swap(view.strides[0], view.strides[2]);
  DLTensor dl{};
  to_dlpack(view, dl);
  EXPECT_EQ(dl.device.device_type, kDLCUDA);
  EXPECT_EQ(dl.device.device_id, 3);
  const TensorView back = from_dlpack(dl);
  expect_same_view(back, view);
  EXPECT_FALSE(back.is_contiguous());
}

TEST(DLPack, NullStridesMeanCompactAndByteOffsetIsHonoured) {
  std::vector<uint16_t> data(64);
  int64_t shape[2] = {3, 5};
  DLTensor dl{};
  dl.data = data.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLBfloat, 16, 1};
  dl.shape = shape;
  dl.strides = nullptr;
  dl.byte_offset = 8;
  const TensorView v = from_dlpack(dl);
  EXPECT_EQ(v.dtype, ScalarType::kBFloat16);
  EXPECT_EQ(v.data, data.data() + 4);
  EXPECT_EQ(v.stride(0), 5);
  EXPECT_EQ(v.stride(1), 1);
  EXPECT_TRUE(v.is_contiguous());
}

TEST(DLPack, Fp8TravelsAsRawBytes) {
  uint8_t data[8];
  const TensorView view = TensorView::contiguous(data, ScalarType::kFp8E4M3, {8});
  DLTensor dl{};
  to_dlpack(view, dl);
  EXPECT_EQ(dl.dtype.code, kDLUInt);
  EXPECT_EQ(dl.dtype.bits, 8);
  EXPECT_EQ(from_dlpack(dl).dtype, ScalarType::kUInt8);
}

TEST(DLPack, UnsupportedInputsAreErrorsNamingThem) {
  int64_t shape[1] = {4};
  double data[4];
  DLTensor dl{};
  dl.data = data;
  dl.device = {kDLCPU, 0};
  dl.ndim = 1;
  dl.shape = shape;
  dl.dtype = {kDLFloat, 64, 1};
  try {
    from_dlpack(dl);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(),
                 "Unsupported DLPack dtype (code 2, bits 64, lanes 1). Valid dtypes are: "
                 "float32, float16, bfloat16, int32, int64, uint8");
  }
  dl.dtype = {kDLFloat, 32, 4};  // vector lanes
  EXPECT_THROW(from_dlpack(dl), Error);
  dl.dtype = {kDLFloat, 32, 1};
  dl.device = {kDLOpenCL, 0};
  try {
    from_dlpack(dl);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("Unsupported DLPack device type 4"));
    EXPECT_THAT(e.what(), HasSubstr("kDLCPU (1), kDLCUDA (2)"));
  }
  dl.device = {kDLCPU, 0};
  dl.ndim = 7;
  EXPECT_THROW(from_dlpack(dl), Error);
}

TEST(HostTensor, OwnsAnAlignedBufferAndClonesExplicitly) {
  HostTensor t(ScalarType::kFloat16, {3, 7});
  EXPECT_EQ(t.nbytes(), 3u * 7u * 2u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  EXPECT_EQ(t.view().numel(), 21);
  EXPECT_EQ(t.view().dtype, ScalarType::kFloat16);
  auto* bits = t.data_as<uint16_t>();
  std::iota(bits, bits + 21, uint16_t{100});
  HostTensor copy = t.clone();
  EXPECT_NE(copy.data(), t.data());
  EXPECT_EQ(std::memcmp(copy.data(), t.data(), t.nbytes()), 0);
  bits[0] = 7;
  EXPECT_EQ(copy.data_as<uint16_t>()[0], 100);
  HostTensor moved = std::move(copy);
  EXPECT_EQ(moved.data_as<uint16_t>()[20], 120);
}

TEST(HostTensor, NegativeDimensionIsAnError) {
  EXPECT_THROW(HostTensor(ScalarType::kFloat32, {2, -1}), Error);
  HostTensor empty(ScalarType::kFloat32, {0, 4});
  EXPECT_EQ(empty.nbytes(), 0u);
}

}  // namespace
}  // namespace attnkit
