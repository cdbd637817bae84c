// Catch2 v2 test runner shared by all test executables.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
