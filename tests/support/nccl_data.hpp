// Where the shared nccl-tests measurements are, and the sizes the calibration tests speak in: defined once for every
// test source of test_calibrate (a unity build compiles them as one source, where two definitions would clash).
#pragma once

#include <string>

namespace ddlsim::test {

inline const std::string kNcclTestsDir = std::string(DDLSIM_SOURCE_DIR) + "/tests/data/shared/nccl-tests";
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * kMiB;

} // namespace ddlsim::test
