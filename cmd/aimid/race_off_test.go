//go:build !race

package main

// raceBuild: this test binary has no race detector (see race_on_test.go).
const raceBuild = false
