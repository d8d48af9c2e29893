# SPDX-License-Identifier: Apache-2.0
# The release this tree must stay compatible with (docs/operating.md, "Upgrading a cluster"):
# "VERSION COMMIT" of the previous release, whose troupe_node the mixed-version test
# (ut/compat/mixed_versions.cmake) builds from this repository's history and rolls to this tree's
# under load. Empty while no release before this tree announces a range of protocol versions:
# the test then plays the next release with this tree's troupe_node (--testing_protocol).
# CHANGELOG.md names each release's commit.
set(TROUPE_PREVIOUS_RELEASE "")
