// Package acceptloop is the one accept loop of the listeners a sandbox's
// channels depend on (the runner's forwards, the daemon's door): it hands
// every connection on until the listener is closed, and waits out any
// other failure (out of file descriptors) instead of stopping, since a
// listener that stopped accepting leaves its port dead for good.
package acceptloop
