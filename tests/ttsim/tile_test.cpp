#include <gtest/gtest.h>

#include <vector>

#include "ttsim/tile.h"

using namespace mha;
using namespace mha::ttsim;

TEST(TtsimTile, RoundTripWithPadding) {
  std::vector<float> v(2 * 33 * 40);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 251) * 0.5f;
  TileTensor t = to_tile_layout(v.data(), {2, 33, 40}, DataFormat::Bfloat16, -1.0f);
  EXPECT_EQ(t.prows, 64);
  EXPECT_EQ(t.pcols, 64);
  EXPECT_EQ(t.batch, 2);
  EXPECT_EQ(t.at(1, 32, 40), -1.0f);  // padding value
  EXPECT_EQ(to_row_major(t), v);
  std::vector<float> tiled = tilize(t);
  TileTensor back = untilize(tiled, t.shape, t.format);
  EXPECT_EQ(back.data, t.data);
}

TEST(TtsimTile, TileOrderIsFacesRowMajor) {
  std::vector<float> v(32 * 64);
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 64; ++c) v[r * 64 + c] = static_cast<float>(r * 100 + c);
  TileTensor t = to_tile_layout(v.data(), {32, 64}, DataFormat::Float32);
  std::vector<float> tl = tilize(t);
  EXPECT_EQ(tl[0], 0.0f);          // tile 0, face 0, (0, 0)
  EXPECT_EQ(tl[15], 15.0f);        // end of face row 0
  EXPECT_EQ(tl[16], 100.0f);       // face 0 row 1
  EXPECT_EQ(tl[256], 16.0f);       // face 1 (top right) starts at column 16
  EXPECT_EQ(tl[512], 1600.0f);     // face 2 (bottom left) starts at row 16
  EXPECT_EQ(tl[768], 1616.0f);     // face 3
  EXPECT_EQ(tl[1024], 32.0f);      // tile 1 starts at column 32
}

TEST(TtsimTile, BlockFloatFollowsFaceRows) {
  // 4096 at column 0 must not wipe out column 16 (another face), only its own row of 16.
  std::vector<float> v(32 * 32, 1.0f);
  v[0] = 4096.0f;
  TileTensor t = to_tile_layout(v.data(), {32, 32}, DataFormat::Bfp8_b);
  EXPECT_EQ(t.at(0, 0, 0), 4096.0f);
  EXPECT_EQ(t.at(0, 0, 15), 0.0f);
  EXPECT_EQ(t.at(0, 0, 16), 1.0f);
  EXPECT_EQ(t.at(0, 1, 0), 1.0f);
}

TEST(TtsimTile, OneDimensionalIsOneRow) {
  std::vector<float> v = {1, 2, 3};
  TileTensor t = to_tile_layout(v.data(), {3}, DataFormat::Bfloat16);
  EXPECT_EQ(t.rows, 1);
  EXPECT_EQ(t.prows, 32);
  EXPECT_EQ(to_row_major(t), v);
  EXPECT_EQ(to_tensor(t).shape(), (Shape{3}));
}

// Converting into a buffer a larger tensor used before gives the fresh
// conversion's tensor exactly: every value, padding included, is written.
TEST(TtsimTile, ConversionIntoAReusedBufferEqualsAFreshOne) {
  std::vector<float> big(3 * 64 * 64), small(2 * 40 * 33);
  for (size_t i = 0; i < big.size(); ++i) big[i] = 1.0f + 0.37f * static_cast<float>(i % 101);
  for (size_t i = 0; i < small.size(); ++i) small[i] = -2.5f + 0.11f * static_cast<float>(i % 53);
  for (DataFormat f : {DataFormat::Float32, DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b}) {
    TileTensor reused;
    to_tile_layout(big.data(), {3, 64, 64}, f, reused, 7.0f);
    to_tile_layout(small.data(), {2, 40, 33}, f, reused, -1.0f);
    const TileTensor fresh = to_tile_layout(small.data(), {2, 40, 33}, f, -1.0f);
    EXPECT_EQ(reused.shape, fresh.shape);
    EXPECT_EQ(reused.format, fresh.format);
    EXPECT_EQ(reused.data, fresh.data) << format_name(f);
  }
}
