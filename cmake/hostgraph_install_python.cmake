# Install-time half of the Python package's install rule (CMakeLists.txt
# sets HG_PY_* before including this with install(SCRIPT)).  The prefix is
# only known now (cmake --install --prefix P), so the package's folder is
# asked of the interpreter now: where it looks for packages under P.
#   - HG_PY_INSTALL_DIR set (the HG_PYTHON_INSTALL_DIR cache variable):
#     P/<that>, as configured;
#   - P is /usr and the interpreter has Debian's deb_system scheme:
#     /usr/lib/python3/dist-packages, where Debian's python3 looks;
#   - otherwise sysconfig's posix_prefix scheme for P, named explicitly
#     (P/lib/python3.X/site-packages: a venv at P, or PYTHONPATH): Debian's
#     default scheme (posix_local) would point under P/local instead.
# _paths.py is written relative to the package, so the prefix can move.
# A relative prefix (cmake --install build --prefix venv) is relative to the
# folder cmake --install runs in, as CMake's own install rules take it; this
# script runs in script mode, where that folder is CMAKE_CURRENT_BINARY_DIR.
get_filename_component(prefix "${CMAKE_INSTALL_PREFIX}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
if(HG_PY_INSTALL_DIR)
  set(pydir "${prefix}/${HG_PY_INSTALL_DIR}")
  set(how "HG_PYTHON_INSTALL_DIR")
elseif(HG_PY_INTERPRETER)
  execute_process(
    COMMAND "${HG_PY_INTERPRETER}" -c [=[
import sys, sysconfig
p = sys.argv[1]
scheme = "deb_system" if p.rstrip("/") == "/usr" and "deb_system" in sysconfig.get_scheme_names() \
    else "posix_prefix"
print(scheme + ";" + sysconfig.get_path("purelib", scheme, vars={"base": p, "platbase": p}))
]=] "${prefix}"
    OUTPUT_VARIABLE answer OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "hostgraph: ${HG_PY_INTERPRETER} could not say where packages go under ${prefix}")
  endif()
  list(GET answer 0 scheme)
  list(GET answer 1 pydir)
  set(how "${HG_PY_INTERPRETER}'s sysconfig scheme ${scheme}")
else()
  set(pydir "${prefix}/lib/python3/dist-packages")
  set(how "no python3 was found at configure time: Debian's layout")
endif()
file(RELATIVE_PATH libdir "${pydir}/hostgraph" "${prefix}/${HG_PY_LIBDIR_REL}")
file(RELATIVE_PATH bindir "${pydir}/hostgraph" "${prefix}/${HG_PY_BINDIR_REL}")
file(RELATIVE_PATH incdir "${pydir}/hostgraph" "${prefix}/${HG_PY_INCLUDEDIR_REL}")
string(REGEX REPLACE "/$" "" libdir "${libdir}")
set(HG_PY_LIBDIR "${libdir}")
set(HG_PY_BINDIR "${bindir}")
set(HG_PY_INCLUDEDIR "${incdir}")
# Staged per destination: two installs of one build may run at once.
string(MD5 key "${pydir}")
configure_file("${HG_PY_PATHS_IN}" "${HG_PY_STAGING}/${key}/_paths.py")
file(INSTALL ${HG_PY_FILES} "${HG_PY_STAGING}/${key}/_paths.py" DESTINATION "${pydir}/hostgraph")
message(STATUS "hostgraph Python package: $ENV{DESTDIR}${pydir}/hostgraph (${how})")
