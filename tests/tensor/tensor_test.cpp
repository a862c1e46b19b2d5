#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tensor/format.h"
#include "tensor/half.h"
#include "tensor/tensor.h"
#include "util/error.h"

using namespace mha;

TEST(Tensor, ShapeNumelRejectsOverflowAndNegatives) {
  EXPECT_EQ(shape_numel({2, 3, 4}), 24);
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({5, 0, 7}), 0);
  EXPECT_THROW(shape_numel({int64_t(1) << 40, int64_t(1) << 40}), InputError);
  EXPECT_THROW(shape_numel({-1, 2}), InputError);
}

TEST(Tensor, CastRoundTripsAndConvertsHalfTypes) {
  Tensor t = Tensor::from_f32({3}, {1.0f, -2.5f, 65504.0f});
  Tensor h = t.cast(DType::F16);
  EXPECT_EQ(h.to_f64(), (std::vector<double>{1.0, -2.5, 65504.0}));
  Tensor b = Tensor::from_f32({1}, {1.00390625f}).cast(DType::BF16);  // tie: rounds to even (1.0)
  EXPECT_EQ(b.get_f64(0), 1.0);
}

TEST(Half, F16CoversSubnormalsInfAndNaN) {
  EXPECT_EQ(f32_from_f16(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_from_f32(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f16_from_f32(70000.0f), 0x7c00);
  EXPECT_TRUE(std::isnan(f32_from_f16(f16_from_f32(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t h = 0; h < 0x7c00; ++h) ASSERT_EQ(f16_from_f32(f32_from_f16(static_cast<uint16_t>(h))), h);
}

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x3f808001u)), 0x3f81);
  // Every NaN, any sign or payload, is 0xFFFF as torch 1.13's
  // `t.to(torch.bfloat16)` writes it on x86 (it used to keep sign and payload).
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7fffffffu, 0x7fc0abcdu})
    EXPECT_EQ(bf16_from_f32(f32_from_bits(nan)), 0xffff) << std::hex << nan;
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x7f800000u)), 0x7f80);  // Inf stays Inf
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0xff800000u)), 0xff80);
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x7f7fffffu)), 0x7f80);  // rounds up to Inf
}

TEST(Tensor, CopiesShareBytesUntilWritten) {
  Tensor a = Tensor::from_f32({3}, {1.f, 2.f, 3.f});
  Tensor b = a;
  EXPECT_EQ(static_cast<const Tensor&>(a).raw(), static_cast<const Tensor&>(b).raw());  // shared
  b.data<float>()[0] = 9.f;                                                           // b detaches
  EXPECT_EQ(a.get_f64(0), 1.0);
  EXPECT_EQ(b.get_f64(0), 9.0);
  EXPECT_NE(static_cast<const Tensor&>(a).raw(), static_cast<const Tensor&>(b).raw());
}

TEST(Tensor, BorrowedBytesAreReadInPlaceAndCopiedOnWrite) {
  const float values[3] = {1.f, 2.f, 3.f};
  Tensor a = Tensor::borrow(DType::F32, {3}, values);
  EXPECT_EQ(static_cast<const Tensor&>(a).raw(), reinterpret_cast<const uint8_t*>(values));  // no copy
  EXPECT_EQ(a.nbytes(), sizeof values);
  EXPECT_EQ(a.to_f32(), (std::vector<float>{1.f, 2.f, 3.f}));
  Tensor b = a;
  b.data<float>()[1] = 9.f;  // b copies the borrowed bytes, which stay as they were
  EXPECT_EQ(values[1], 2.f);
  EXPECT_EQ(a.get_f64(1), 2.0);
  EXPECT_EQ(b.get_f64(1), 9.0);
  EXPECT_EQ(b.get_f64(2), 3.0);
}

// format_torch reads the elements it prints from the tensor (no float64
// copy of a large output); the strings are what torch 1.13 prints for the
// same tensors (str(torch.arange(3000, dtype=float32) / 7).reshape(3, 1000)).
TEST(Format, SummarisedAndFullPrintsMatchTorch) {
  std::vector<float> v(3000);
  for (int i = 0; i < 3000; ++i) v[i] = static_cast<float>(i) / 7.0f;
  EXPECT_EQ(format_torch(Tensor::from_f32({3, 1000}, v)),
            "tensor([[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 1.4243e+02, 1.4257e+02,\n"
            "         1.4271e+02],\n"
            "        [1.4286e+02, 1.4300e+02, 1.4314e+02,  ..., 2.8529e+02, 2.8543e+02,\n"
            "         2.8557e+02],\n"
            "        [2.8571e+02, 2.8586e+02, 2.8600e+02,  ..., 4.2814e+02, 4.2829e+02,\n"
            "         4.2843e+02]])");
  EXPECT_EQ(format_torch(Tensor::from_f64({2, 3}, {0, 1, 2, 3, 4, 5})),
            "tensor([[0., 1., 2.],\n        [3., 4., 5.]], dtype=torch.float64)");
}
