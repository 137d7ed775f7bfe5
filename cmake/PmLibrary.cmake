# pm_add_library(NAME OBJECTS <object library> OUTPUT <file name> EXPORT <name>
#                [PRIVATE deps...] [PUBLIC deps...])
#
# One set of objects (compiled once, position-independent) becomes two
# libraries: NAME, static (what the tree links: tests, tools, examples), and
# NAME_shared, with a SONAME. Installed and exported as libpm::<EXPORT>
# (shared) and libpm::<EXPORT>_static. The caller adds the dependency on the
# other library of the project itself (static to static, shared to shared).
function(pm_add_library name)
  cmake_parse_arguments(A "" "OBJECTS;OUTPUT;EXPORT" "PRIVATE;PUBLIC" ${ARGN})
  add_library(${name} STATIC $<TARGET_OBJECTS:${A_OBJECTS}>)
  add_library(${name}_shared SHARED $<TARGET_OBJECTS:${A_OBJECTS}>)
  get_target_property(inc ${A_OBJECTS} PM_PUBLIC_INCLUDE)
  foreach(t ${name} ${name}_shared)
    target_include_directories(${t} PUBLIC $<BUILD_INTERFACE:${inc}>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${t} PRIVATE ${A_PRIVATE} PUBLIC ${A_PUBLIC})
    # The public headers are C++20: consumers compile with it too.
    target_compile_features(${t} PUBLIC cxx_std_20)
  endforeach()
  set_target_properties(${name} PROPERTIES OUTPUT_NAME ${A_OUTPUT} EXPORT_NAME ${A_EXPORT}_static)
  # A C program (a project without C++, linked by the C driver) needs the
  # C++ runtime the static library's objects use.
  target_link_libraries(${name} INTERFACE $<$<LINK_LANGUAGE:C>:stdc++>)
  # $ORIGIN: libpmkv finds libpm beside it in any prefix, also for a C
  # program whose linker dropped its own (unneeded) reference to libpm.
  set_target_properties(${name}_shared PROPERTIES OUTPUT_NAME ${A_OUTPUT} EXPORT_NAME ${A_EXPORT}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR} INSTALL_RPATH "$ORIGIN")
endfunction()

# pm_add_objects(NAME INCLUDE <public include dir> sources...): the object
# library behind pm_add_library, its public headers recorded for it.
function(pm_add_objects name)
  cmake_parse_arguments(A "" "INCLUDE" "" ${ARGN})
  add_library(${name} OBJECT ${A_UNPARSED_ARGUMENTS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON
    PM_PUBLIC_INCLUDE ${A_INCLUDE})
  target_include_directories(${name} PUBLIC ${A_INCLUDE} PRIVATE ${PROJECT_SOURCE_DIR})
endfunction()
