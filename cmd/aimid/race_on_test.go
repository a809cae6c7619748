//go:build race

package main

// raceBuild: this test binary has the race detector, so the daemon it
// runs is built with it too and the end-to-end tests race the daemon.
const raceBuild = true
