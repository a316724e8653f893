# Install rules, find_package(zcx) config and zcx.pc.
include(CMakePackageConfigHelpers)
install(TARGETS zcx EXPORT zcxTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY transport/include/zcx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT zcxTargets NAMESPACE zcx:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zcx)
configure_package_config_file(cmake/zcxConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/zcxConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zcx)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/zcxConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/zcxConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/zcxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zcx)
configure_file(cmake/zcx.pc.in ${CMAKE_CURRENT_BINARY_DIR}/zcx.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/zcx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
