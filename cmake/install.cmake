# What `cmake --install build --prefix PREFIX` installs, and the Debian package (`cpack` in build/;
# scripts/check-install tests both). Layout under PREFIX:
#   bin/                  laggard and the programs users run (the demos, laggard-gen-synthetic)
#   lib/                  liblaggard.so (LD_PRELOAD) and the libraries it loads from its own
#                         directory (liblaggard-re2.so); `laggard run` finds lib/ from bin/laggard
#                         (report/cli/launcher.cpp, find_library)
#   share/laggard/        the Grafana dashboard, and files that ranks or tools read at run time
#   share/doc/laggard/    README and docs/
# A new file users need is one line below: a program in laggard_install_programs, a library
# loaded beside liblaggard.so in laggard_install_libraries, a data file (a Python sitecustomize,
# a config) as `install(FILES path DESTINATION ${LAGGARD_INSTALL_DATADIR}/<subdir>)`.
include(GNUInstallDirs)
set(LAGGARD_INSTALL_LIBDIR lib CACHE STRING "where liblaggard.so goes under the prefix (bin/../lib is searched)")
set(LAGGARD_INSTALL_DATADIR ${CMAKE_INSTALL_DATAROOTDIR}/laggard)

set(laggard_install_programs laggard_cli laggard_demo laggard_hang_demo laggard_gen_synthetic)
set(laggard_install_libraries laggard laggard_re2)

install(TARGETS ${laggard_install_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${laggard_install_libraries} LIBRARY DESTINATION ${LAGGARD_INSTALL_LIBDIR})
install(FILES docs/grafana-dashboard.json DESTINATION ${LAGGARD_INSTALL_DATADIR})
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md" PATTERN "*.png")

# The .deb: installs under /usr; the shared libraries it needs (libre2, zlib, zstd, SQLite, libstdc++)
# are found by dpkg-shlibdeps from the installed files. libunwind8 gives hang reports native stacks,
# addr2line (binutils) file:line in `laggard stacks`: recommended, loaded only when present.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME laggard)
set(CPACK_PACKAGE_VENDOR "laggard developers")
set(CPACK_PACKAGE_CONTACT "laggard developers <laggard@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "find the straggler ranks of multi-GPU training jobs, no source change")
set(CPACK_PACKAGE_DESCRIPTION "liblaggard.so, injected with LD_PRELOAD (laggard run), records NVTX ranges, \
CUDA kernels (CUPTI) and NCCL collectives per rank; laggard report merges the ranks and names the slow \
rank, section and cause.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libunwind8, binutils")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus")
set(CPACK_STRIP_FILES OFF)  # keep the symbols: hang reports and `laggard stacks` name laggard's frames too
include(CPack)
