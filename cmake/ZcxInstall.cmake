# Install rules, find_package(zcx) config and zcx.pc. libzcx holds both layers, so both
# public headers go with it; zcx-mpi (built when MPI is found) is the config's "mpi"
# component, in an export set of its own because it needs the consumer's MPI.
include(CMakePackageConfigHelpers)
set(zcx_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/zcx)
install(TARGETS zcx EXPORT zcxTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY transport/include/zcx collectives/include/zcx
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN coll_mpi.h EXCLUDE)
install(EXPORT zcxTargets NAMESPACE zcx:: DESTINATION ${zcx_cmake_dir})
if(TARGET zcx_mpi)
  install(TARGETS zcx_mpi EXPORT zcxMpiTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES collectives/include/zcx/coll_mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zcx)
  install(EXPORT zcxMpiTargets NAMESPACE zcx:: DESTINATION ${zcx_cmake_dir})
endif()
configure_package_config_file(cmake/zcxConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/zcxConfig.cmake
  INSTALL_DESTINATION ${zcx_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/zcxConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/zcxConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/zcxConfigVersion.cmake
        DESTINATION ${zcx_cmake_dir})

# zcx.pc names its prefix relative to its own folder (${pcfiledir}), so a tree installed
# with --prefix or DESTDIR, or moved, still points at itself.
function(zcx_pc_dir var dir)
  if(IS_ABSOLUTE "${dir}")
    set(${var} "${dir}" PARENT_SCOPE)
  else()
    set(${var} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(ZCX_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH zcx_pc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" zcx_pc_up "${zcx_pc_up}")
  set(ZCX_PC_PREFIX "\${pcfiledir}/${zcx_pc_up}")
endif()
zcx_pc_dir(ZCX_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
zcx_pc_dir(ZCX_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
configure_file(cmake/zcx.pc.in ${CMAKE_CURRENT_BINARY_DIR}/zcx.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/zcx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
