// Compiles the test suite's precompiled header (tests/CMakeLists.txt, ddlsim_test_pch); nothing else.
