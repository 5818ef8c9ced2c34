# Install rules and Debian packages (CPack), built by scripts/package.sh: yard-master,
# yard-agent (with yard-shim and yard-rsh) and yardctl. Test-only binaries (yard-gpu-probe,
# yard-synthetic-nodes, the test and bench programs) have no install rule, so no package
# carries them. docs/operations.md says what goes where and why.
include(GNUInstallDirs)
# `cmake --install` and cpack install what is built; they never build (scripts/package.sh builds
# first unless told not to), so packaging cannot start a second build in a busy build tree.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

# Debian 12's unit directory (its packages still ship units in /lib; /lib is /usr/lib there).
set(YARD_SYSTEMD_UNIT_DIR "/lib/systemd/system" CACHE PATH "Where packages install systemd units")
set(YARD_PACKAGE_MAINTAINER "Yard maintainers <maintainers@yard.invalid>" CACHE STRING
    "Maintainer field of the Debian packages")

install(TARGETS yard-master RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT master)
# The web console (docs/console.md), when scripts/build.sh built it: served by the master.
install(DIRECTORY ${CMAKE_BINARY_DIR}/console/ DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/yard/console COMPONENT master OPTIONAL)
# yard-shim must sit next to yard-agent (its default --shim), and yard-rsh next to the shim
# (${YARD_BIN_DIR} in OpenMPI launchers' environment).
install(TARGETS yard-agent yard-shim yard-rsh RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT agent)
install(TARGETS yardctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)

# The packaged configs are configs/*.toml with one change each: no join token. The examples
# say "change-me" so a dev cluster works as written; an installed master must not accept
# agents with a token everyone knows, and an installed agent must not start before it is told
# the real one. Generated at configure time; cmake re-runs when the examples change.
function(yard_packaged_config name from to note)
  set(src ${PROJECT_SOURCE_DIR}/configs/${name})
  file(READ ${src} text)
  string(FIND "${text}" "${from}" at)
  if(at EQUAL -1)
    message(WARNING "configs/${name} no longer has the line '${from}'; the packaged copy keeps its token "
                    "(cmake/Packaging.cmake, tests/packaging/package_test.sh checks it)")
  endif()
  string(REPLACE "${from}" "${note}\n${to}" text "${text}")
  file(WRITE ${CMAKE_BINARY_DIR}/packaging/${name}.new "${text}")
  configure_file(${CMAKE_BINARY_DIR}/packaging/${name}.new ${CMAKE_BINARY_DIR}/packaging/${name} COPYONLY)
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
endfunction()
yard_packaged_config(master.toml "join_token = \"change-me\"" "join_token = \"\""
  "# Installed from the package: empty, so no agent can join until you set one\n# (e.g. `openssl rand -hex 24`) and restart yard-master.")
yard_packaged_config(agent.toml "token = \"change-me\"" "token = \"\""
  "# Installed from the package: empty, so yard-agent refuses to start until you set it\n# (and master, name, address) and run `systemctl enable --now yard-agent`.")

# Configs are conffiles (packaging/deb/*/conffiles): dpkg keeps an admin's edits on upgrade.
# Their final owner and mode (master.toml root:yard 0640, agent.toml 0600) are set by the
# postinst, which creates the yard user first.
install(FILES ${CMAKE_BINARY_DIR}/packaging/master.toml DESTINATION /etc/yard
        PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT master)
install(FILES ${CMAKE_BINARY_DIR}/packaging/agent.toml DESTINATION /etc/yard
        PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT agent)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/yard-master.service DESTINATION ${YARD_SYSTEMD_UNIT_DIR}
        COMPONENT master)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/yard-agent.service DESTINATION ${YARD_SYSTEMD_UNIT_DIR}
        COMPONENT agent)
install(FILES ${PROJECT_SOURCE_DIR}/docs/operations.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/yard-master COMPONENT master)
install(FILES ${PROJECT_SOURCE_DIR}/docs/operations.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/yard-agent COMPONENT agent)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME yard)
set(CPACK_PACKAGE_VENDOR "Yard")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${YARD_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_COMPONENTS_ALL master agent cli)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)      # scripts/package.sh --release N overrides it
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)   # Depends: from the libraries the binaries link
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

set(CPACK_DEBIAN_MASTER_PACKAGE_NAME yard-master)
set(CPACK_DEBIAN_MASTER_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_MASTER_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_MASTER_PACKAGE_SUGGESTS "yardctl")
set(CPACK_COMPONENT_MASTER_DESCRIPTION "Yard master: queues, quotas, jobs and the gang scheduler
yard-master keeps a Yard cluster's queues, quotas, datasets, nodes and jobs in SQLite,
gang-schedules distributed training jobs onto node agents and serves yardctl.")
set(CPACK_DEBIAN_MASTER_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/deb/yard-master/conffiles
    ${PROJECT_SOURCE_DIR}/packaging/deb/yard-master/postinst
    ${PROJECT_SOURCE_DIR}/packaging/deb/yard-master/prerm
    ${PROJECT_SOURCE_DIR}/packaging/deb/yard-master/postrm)

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME yard-agent)
set(CPACK_DEBIAN_AGENT_PACKAGE_SECTION admin)
# Image replicas need containerd and runc; host-process replicas need neither.
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "containerd, runc")
set(CPACK_COMPONENT_AGENT_DESCRIPTION "Yard node agent: runs training replicas under cgroups
yard-agent runs the replicas a Yard master places on this host, as containers through
containerd or as host processes under yard-shim, with cgroup limits, and reports their
state and usage. Includes yard-shim and yard-rsh (OpenMPI's rsh agent).")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/deb/yard-agent/conffiles
    ${PROJECT_SOURCE_DIR}/packaging/deb/yard-agent/postinst
    ${PROJECT_SOURCE_DIR}/packaging/deb/yard-agent/prerm
    ${PROJECT_SOURCE_DIR}/packaging/deb/yard-agent/postrm)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME yardctl)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_CLI_DESCRIPTION "Yard command-line client
yardctl submits and inspects Yard jobs and administers queues, datasets and nodes.")

include(CPack)
