// Package repocheck holds tests of rules that span the whole repository
// (file and function size, no goto, every end-to-end test of cmd/aimid
// parallel or saying why not) rather than one package. It has no
// code.
package repocheck
