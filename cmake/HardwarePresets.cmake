# The hardware presets (--hw=NAME) are the JSON files in hw/, compiled into
# zinc_support: zinc_embed_hardware_presets(TARGET ROOT) writes them as C++
# string literals into <build>/generated/zinc/HardwarePresets.inc, which
# support/Hardware.cpp includes. Editing a file in hw/ re-runs the configure
# step, so a preset and its documented JSON cannot drift apart.
function(zinc_embed_hardware_presets target root)
  file(GLOB files CONFIGURE_DEPENDS ${root}/hw/*.json)
  set(body "// Generated from hw/*.json by cmake/HardwarePresets.cmake: do not edit.\n")
  foreach(file ${files})
    get_filename_component(name ${file} NAME_WE)
    file(READ ${file} text)
    string(APPEND body "{\"${name}\", R\"zinc_hw(${text})zinc_hw\"},\n")
  endforeach()
  set(out ${CMAKE_BINARY_DIR}/generated/zinc/HardwarePresets.inc)
  file(CONFIGURE OUTPUT ${out} CONTENT "${body}" @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${files})
  target_include_directories(${target} PRIVATE ${CMAKE_BINARY_DIR}/generated)
endfunction()
