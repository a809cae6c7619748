// Package repocheck holds tests of rules that span the whole repository
// (file and function size, no goto) rather than one package. It has no
// code.
package repocheck
