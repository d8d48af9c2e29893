# SPDX-License-Identifier: Apache-2.0
# The release this tree must stay compatible with (docs/operating.md, "Upgrading a cluster"):
# "VERSION COMMIT" of the previous release. ctest compat.previous_release
# (ut/compat/mixed_versions.cmake) builds that release's troupe_node from this repository's
# history and rolls a cluster under load from it to this tree's. Empty while no release before
# this tree announces a range of protocol versions (then only compat.next_release runs).
# CHANGELOG.md names each release's commit.
set(TROUPE_PREVIOUS_RELEASE "0.1.0 e0ca7876c386e6545e9dc84bcb99c9dd31927778")
