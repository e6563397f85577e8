#!/usr/bin/env bash
echo "no driver binary yet"
