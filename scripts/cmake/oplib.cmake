# The op library: every op of the op table and every rule file in generators/rules, built by
# the opforge CLI into OPFORGE_DEFAULT_REGISTRY through the persistent compile cache
# ($OPFORGE_CACHE_DIR, else ~/.cache/opforge), so an unchanged kernel is never compiled twice,
# whichever checkout or build folder asks. Always run (1-2 s when every kernel is cached): the
# CLI decides what is out of date, from the cache keys.
if(NOT OPFORGE_BUILD_OPLIB)
  message(STATUS "OPFORGE_BUILD_OPLIB is OFF: no op library is built or installed")
  return()
endif()
add_custom_target(oplib ALL
  COMMAND opforge build --registry ${OPFORGE_DEFAULT_REGISTRY}
          --rules ${PROJECT_SOURCE_DIR}/generators/rules
  COMMENT "Regenerating the op library into ${OPFORGE_DEFAULT_REGISTRY}"
  # The console pool: the CLI compiles on every core and prints its own progress.
  USES_TERMINAL VERBATIM)
add_dependencies(oplib opforge)
