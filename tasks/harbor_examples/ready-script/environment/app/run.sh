#!/bin/bash
# Says the service is ready.
echo redy
