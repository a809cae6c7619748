// Package testwait is how tests wait for something that happens on its own
// time (a daemon answering, a container exiting, a line reaching a journal):
// a poll with a deadline that says, when it gives up, what it waited for and
// the state it saw last. It owns no state; what to poll is the caller's.
package testwait
