// Package browsertest gives tests a real headless Chromium to drive with
// chromedp, with no browser installed on the machine: Chromium and a font
// come from Debian's packages, built into an image through package
// sandboximage (the same apt download, dpkg-deb unpack and Engine API import
// as the sandbox image, cached by a content key of the package list), and
// run in a container on the host's network so that the page it loads can be
// a server the test runs on 127.0.0.1. The DevTools port is bound to the
// host's loopback, never to another address. The container has the
// engine's largest CPU weight: it stands for a person's browser, a program
// beside the engine, not for one more of the sandboxes it shares the
// engine's CPU group with.
//
// It leaves what to browse and what to assert to the tests.
package browsertest
