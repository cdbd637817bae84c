// GoogLeNet (3x224x224) and Inception v3 (3x299x299) as torchvision's default constructors build them for
// training: aux_logits=True, transform_input=False (torchvision/models/googlenet.py, inception.py). Convolutions
// are BasicConv2d = Conv2d(bias=False) + BatchNorm2d(eps=0.001) + ReLU; GoogLeNet's "5x5" branch is a 3x3 conv there.
// The auxiliary classifiers run in forward order (after inception4a / 4d, after Mixed_6e) with their own loss.
// Layers are in forward order, so GoogLeNet's aux1/aux2 tensors come before inception4b/4e's in the flattened
// list, whereas named_parameters() registers them after inception5b (Inception v3's AuxLogits order agrees).
#include "dag/zoo/builder.hpp"
#include "dag/zoo/families.hpp"

#include <array>
#include <string>

namespace ddlsim::dag::detail {

namespace {

constexpr std::int64_t kInceptionClasses = 1000;

ConvSpec rect(std::int64_t kh, std::int64_t kw, std::int64_t ph, std::int64_t pw) {
  return ConvSpec{kh, kw, 1, 1, ph, pw, 1, false};
}

/// BasicConv2d: `name.conv`, `name.bn`, ReLU in place.
Chw basic_conv(ModelBuilder& b, const std::string& name, Chw in, std::int64_t out_channels, const ConvSpec& spec) {
  Chw out = b.conv2d(name + ".conv", in, out_channels, spec);
  out = b.batchnorm2d(name + ".bn", out);
  b.relu(out.numel());
  return out;
}

// ---- GoogLeNet -------------------------------------------------------------------------------------------

Chw googlenet_inception(ModelBuilder& b, const std::string& p, Chw x, std::int64_t ch1x1, std::int64_t ch3x3red,
                        std::int64_t ch3x3, std::int64_t ch5x5red, std::int64_t ch5x5, std::int64_t pool_proj) {
  const Chw b1 = basic_conv(b, p + ".branch1", x, ch1x1, ConvSpec::square(1));
  Chw b2 = basic_conv(b, p + ".branch2.0", x, ch3x3red, ConvSpec::square(1));
  b2 = basic_conv(b, p + ".branch2.1", b2, ch3x3, ConvSpec::square(3, 1, 1));
  Chw b3 = basic_conv(b, p + ".branch3.0", x, ch5x5red, ConvSpec::square(1));
  b3 = basic_conv(b, p + ".branch3.1", b3, ch5x5, ConvSpec::square(3, 1, 1));
  Chw b4 = b.max_pool2d(p + ".branch4.0", x, {3, 1, 1, true});
  b4 = basic_conv(b, p + ".branch4.1", b4, pool_proj, ConvSpec::square(1));
  const std::array parts{b1, b2, b3, b4};
  return b.concat(p + ".cat", parts);
}

void googlenet_aux(ModelBuilder& b, const std::string& p, Chw x) {
  Chw y = b.adaptive_avg_pool2d(p + ".adaptive_avg_pool2d", x, 4, 4);
  y = basic_conv(b, p + ".conv", y, 128, ConvSpec::square(1));
  constexpr std::int64_t hidden = 1024;
  const Src fc1 = b.linear(p + ".fc1", y.src, 1, y.numel(), hidden);
  b.relu(hidden);
  b.dropout(hidden); // p = 0.7
  b.linear(p + ".fc2", fc1, 1, hidden, kInceptionClasses);
  b.cross_entropy(kInceptionClasses);
}

// ---- Inception v3 ----------------------------------------------------------------------------------------

Chw inception_a(ModelBuilder& b, const std::string& p, Chw x, std::int64_t pool_features) {
  const Chw b1 = basic_conv(b, p + ".branch1x1", x, 64, ConvSpec::square(1));
  Chw b5 = basic_conv(b, p + ".branch5x5_1", x, 48, ConvSpec::square(1));
  b5 = basic_conv(b, p + ".branch5x5_2", b5, 64, ConvSpec::square(5, 1, 2));
  Chw b3 = basic_conv(b, p + ".branch3x3dbl_1", x, 64, ConvSpec::square(1));
  b3 = basic_conv(b, p + ".branch3x3dbl_2", b3, 96, ConvSpec::square(3, 1, 1));
  b3 = basic_conv(b, p + ".branch3x3dbl_3", b3, 96, ConvSpec::square(3, 1, 1));
  Chw bp = b.avg_pool2d(p + ".avg_pool2d", x, {3, 1, 1});
  bp = basic_conv(b, p + ".branch_pool", bp, pool_features, ConvSpec::square(1));
  const std::array parts{b1, b5, b3, bp};
  return b.concat(p + ".cat", parts);
}

Chw inception_b(ModelBuilder& b, const std::string& p, Chw x) {
  const Chw b3 = basic_conv(b, p + ".branch3x3", x, 384, ConvSpec::square(3, 2));
  Chw bd = basic_conv(b, p + ".branch3x3dbl_1", x, 64, ConvSpec::square(1));
  bd = basic_conv(b, p + ".branch3x3dbl_2", bd, 96, ConvSpec::square(3, 1, 1));
  bd = basic_conv(b, p + ".branch3x3dbl_3", bd, 96, ConvSpec::square(3, 2));
  const Chw bp = b.max_pool2d(p + ".max_pool2d", x, {3, 2});
  const std::array parts{b3, bd, bp};
  return b.concat(p + ".cat", parts);
}

Chw inception_c(ModelBuilder& b, const std::string& p, Chw x, std::int64_t c7) {
  const Chw b1 = basic_conv(b, p + ".branch1x1", x, 192, ConvSpec::square(1));
  Chw b7 = basic_conv(b, p + ".branch7x7_1", x, c7, ConvSpec::square(1));
  b7 = basic_conv(b, p + ".branch7x7_2", b7, c7, rect(1, 7, 0, 3));
  b7 = basic_conv(b, p + ".branch7x7_3", b7, 192, rect(7, 1, 3, 0));
  Chw bd = basic_conv(b, p + ".branch7x7dbl_1", x, c7, ConvSpec::square(1));
  bd = basic_conv(b, p + ".branch7x7dbl_2", bd, c7, rect(7, 1, 3, 0));
  bd = basic_conv(b, p + ".branch7x7dbl_3", bd, c7, rect(1, 7, 0, 3));
  bd = basic_conv(b, p + ".branch7x7dbl_4", bd, c7, rect(7, 1, 3, 0));
  bd = basic_conv(b, p + ".branch7x7dbl_5", bd, 192, rect(1, 7, 0, 3));
  Chw bp = b.avg_pool2d(p + ".avg_pool2d", x, {3, 1, 1});
  bp = basic_conv(b, p + ".branch_pool", bp, 192, ConvSpec::square(1));
  const std::array parts{b1, b7, bd, bp};
  return b.concat(p + ".cat", parts);
}

Chw inception_d(ModelBuilder& b, const std::string& p, Chw x) {
  Chw b3 = basic_conv(b, p + ".branch3x3_1", x, 192, ConvSpec::square(1));
  b3 = basic_conv(b, p + ".branch3x3_2", b3, 320, ConvSpec::square(3, 2));
  Chw b7 = basic_conv(b, p + ".branch7x7x3_1", x, 192, ConvSpec::square(1));
  b7 = basic_conv(b, p + ".branch7x7x3_2", b7, 192, rect(1, 7, 0, 3));
  b7 = basic_conv(b, p + ".branch7x7x3_3", b7, 192, rect(7, 1, 3, 0));
  b7 = basic_conv(b, p + ".branch7x7x3_4", b7, 192, ConvSpec::square(3, 2));
  const Chw bp = b.max_pool2d(p + ".max_pool2d", x, {3, 2});
  const std::array parts{b3, b7, bp};
  return b.concat(p + ".cat", parts);
}

Chw inception_e(ModelBuilder& b, const std::string& p, Chw x) {
  const Chw b1 = basic_conv(b, p + ".branch1x1", x, 320, ConvSpec::square(1));
  const Chw b3 = basic_conv(b, p + ".branch3x3_1", x, 384, ConvSpec::square(1));
  const std::array b3_parts{basic_conv(b, p + ".branch3x3_2a", b3, 384, rect(1, 3, 0, 1)),
                            basic_conv(b, p + ".branch3x3_2b", b3, 384, rect(3, 1, 1, 0))};
  const Chw b3_cat = b.concat(p + ".branch3x3_cat", b3_parts);
  Chw bd = basic_conv(b, p + ".branch3x3dbl_1", x, 448, ConvSpec::square(1));
  bd = basic_conv(b, p + ".branch3x3dbl_2", bd, 384, ConvSpec::square(3, 1, 1));
  const std::array bd_parts{basic_conv(b, p + ".branch3x3dbl_3a", bd, 384, rect(1, 3, 0, 1)),
                            basic_conv(b, p + ".branch3x3dbl_3b", bd, 384, rect(3, 1, 1, 0))};
  const Chw bd_cat = b.concat(p + ".branch3x3dbl_cat", bd_parts);
  Chw bp = b.avg_pool2d(p + ".avg_pool2d", x, {3, 1, 1});
  bp = basic_conv(b, p + ".branch_pool", bp, 192, ConvSpec::square(1));
  const std::array parts{b1, b3_cat, bd_cat, bp};
  return b.concat(p + ".cat", parts);
}

void inception_aux(ModelBuilder& b, const std::string& p, Chw x) {
  Chw y = b.avg_pool2d(p + ".avg_pool2d", x, {5, 3});
  y = basic_conv(b, p + ".conv0", y, 128, ConvSpec::square(1));
  y = basic_conv(b, p + ".conv1", y, 768, ConvSpec::square(5));
  y = b.adaptive_avg_pool2d(p + ".adaptive_avg_pool2d", y, 1, 1);
  b.linear(p + ".fc", y.src, 1, y.numel(), kInceptionClasses);
  b.cross_entropy(kInceptionClasses);
}

} // namespace

Model build_googlenet() {
  constexpr std::int64_t size = 224;
  ModelBuilder b("googlenet", 3.0 * size * size * kFloatBytes);
  Chw x = basic_conv(b, "conv1", {3, size, size}, 64, ConvSpec::square(7, 2, 3));
  x = b.max_pool2d("maxpool1", x, {3, 2, 0, true});
  x = basic_conv(b, "conv2", x, 64, ConvSpec::square(1));
  x = basic_conv(b, "conv3", x, 192, ConvSpec::square(3, 1, 1));
  x = b.max_pool2d("maxpool2", x, {3, 2, 0, true});
  x = googlenet_inception(b, "inception3a", x, 64, 96, 128, 16, 32, 32);
  x = googlenet_inception(b, "inception3b", x, 128, 128, 192, 32, 96, 64);
  x = b.max_pool2d("maxpool3", x, {3, 2, 0, true});
  x = googlenet_inception(b, "inception4a", x, 192, 96, 208, 16, 48, 64);
  googlenet_aux(b, "aux1", x);
  x = googlenet_inception(b, "inception4b", x, 160, 112, 224, 24, 64, 64);
  x = googlenet_inception(b, "inception4c", x, 128, 128, 256, 24, 64, 64);
  x = googlenet_inception(b, "inception4d", x, 112, 144, 288, 32, 64, 64);
  googlenet_aux(b, "aux2", x);
  x = googlenet_inception(b, "inception4e", x, 256, 160, 320, 32, 128, 128);
  x = b.max_pool2d("maxpool4", x, {2, 2, 0, true});
  x = googlenet_inception(b, "inception5a", x, 256, 160, 320, 32, 128, 128);
  x = googlenet_inception(b, "inception5b", x, 384, 192, 384, 48, 128, 128);
  x = b.adaptive_avg_pool2d("avgpool", x, 1, 1);
  b.dropout(x.numel()); // p = 0.2
  b.linear("fc", x.src, 1, x.numel(), kInceptionClasses);
  b.cross_entropy(kInceptionClasses);
  return std::move(b).finish();
}

Model build_inception_v3() {
  constexpr std::int64_t size = 299;
  ModelBuilder b("inception_v3", 3.0 * size * size * kFloatBytes);
  Chw x = basic_conv(b, "Conv2d_1a_3x3", {3, size, size}, 32, ConvSpec::square(3, 2));
  x = basic_conv(b, "Conv2d_2a_3x3", x, 32, ConvSpec::square(3));
  x = basic_conv(b, "Conv2d_2b_3x3", x, 64, ConvSpec::square(3, 1, 1));
  x = b.max_pool2d("maxpool1", x, {3, 2});
  x = basic_conv(b, "Conv2d_3b_1x1", x, 80, ConvSpec::square(1));
  x = basic_conv(b, "Conv2d_4a_3x3", x, 192, ConvSpec::square(3));
  x = b.max_pool2d("maxpool2", x, {3, 2});
  x = inception_a(b, "Mixed_5b", x, 32);
  x = inception_a(b, "Mixed_5c", x, 64);
  x = inception_a(b, "Mixed_5d", x, 64);
  x = inception_b(b, "Mixed_6a", x);
  x = inception_c(b, "Mixed_6b", x, 128);
  x = inception_c(b, "Mixed_6c", x, 160);
  x = inception_c(b, "Mixed_6d", x, 160);
  x = inception_c(b, "Mixed_6e", x, 192);
  inception_aux(b, "AuxLogits", x);
  x = inception_d(b, "Mixed_7a", x);
  x = inception_e(b, "Mixed_7b", x);
  x = inception_e(b, "Mixed_7c", x);
  x = b.adaptive_avg_pool2d("avgpool", x, 1, 1);
  b.dropout(x.numel()); // p = 0.5
  b.linear("fc", x.src, 1, x.numel(), kInceptionClasses);
  b.cross_entropy(kInceptionClasses);
  return std::move(b).finish();
}

} // namespace ddlsim::dag::detail
