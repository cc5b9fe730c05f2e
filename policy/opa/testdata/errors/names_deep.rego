package turngate.lib.deep

on := true
