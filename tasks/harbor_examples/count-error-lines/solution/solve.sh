#!/bin/bash
cd /app
awk '$2 == "ERROR"' logs/*.log | wc -l > answer.txt
