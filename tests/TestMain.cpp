// main() of cpu_tests and gpu_tests (instead of gtest_main): the death tests
// (EXPECT_REFUSED_IN_CHILD, style "threadsafe") re-execute the test binary
// as argv[0] with execv, which does not search PATH, so a suite started as
// `gpu_tests` through PATH from another directory failed them ("execv
// failed: No such file or directory"). argv[0] becomes the binary's own path
// (/proc/self/exe) first, so how the suite is started does not matter.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    static std::string self;
    char buf[PATH_MAX];
    // realpath of the running binary (Linux); kept as given when unknown
    if (char* p = ::realpath("/proc/self/exe", buf)) self = p;
    std::vector<char*> args(argv, argv + argc);
    if (!self.empty() && argc > 0) args[0] = self.data();
    args.push_back(nullptr);
    int n = argc;
    ::testing::InitGoogleTest(&n, args.data());
    return RUN_ALL_TESTS();
}
