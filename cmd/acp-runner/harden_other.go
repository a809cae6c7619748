//go:build !linux

package main

func harden() error { return nil }

func dropPrivileges(string) error { return nil }
