// Package sandboximage builds the sandbox image aimid runs one container of
// per task file (aimi-sandbox:latest): acp-runner, git, CA certificates, dash
// and a few core tools, as an unprivileged user with /workspace, from
// Debian's packages and with no registry.
//
// How: apt-get resolves and downloads git and friends with their full
// dependency closure into a private apt state (the host's package database
// is never touched; the mirror is the one the host's apt already uses),
// dpkg-deb streams each package's filesystem tar, and the merger writes one
// rootfs tar laid out as dpkg would (merged /usr), doing by hand the little
// the maintainer scripts would (accounts, the CA bundle). That tar is
// imported through the Engine API as a base image; a one-COPY legacy build
// on top adds acp-runner (CGO_ENABLED=0) and the image config.
//
// Why not debootstrap: measured on a 2-core machine,
// `debootstrap --variant=minbase --include=git,ca-certificates bookworm`
// took 91 s and 342 MB before any tar or import, and needs chroot; the
// download-and-merge route takes seconds, needs no chroot and gives a
// smaller image.
//
// Caches, cheapest first: the final image this builder committed for the
// content key (hash of rootfs key, acp-runner binary, recipe, labels),
// recorded by image ID in $XDG_CACHE_HOME/aimi/sandbox/images, is only
// tagged (not an image found by its org.aimi.sandbox-key label: images
// built FROM the sandbox image inherit it); the base image aimi-sandbox-base:<rootfs key>
// is reused; the rootfs tarball in $XDG_CACHE_HOME/aimi/sandbox, keyed by
// release, architecture, package list and layout, is reused. Builds lock
// that directory, so concurrent test packages share one build.
//
// It leaves running the image to others: the container package creates
// containers from it, internal/sandboximage/sandboxtest gives tests a
// throw-away tag of it, and `make sandbox-image` runs cmd/build.
package sandboximage
