#!/usr/bin/env bash
huggingface-cli download Qwen/Qwen2.5-3B-Instruct
python3 examples/data_preprocess/gsm8k.py --local_dir ~/data/gsm8k
