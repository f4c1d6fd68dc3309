/* tests/helpers/convert.h — write a Hugging Face safetensors model as GGUF with
 * llama.cpp's tensor names and metadata keys (and nibble's keys for the Spark
 * options), so that the GGUF loader can be checked against the same weights. */
#ifndef NB_TEST_CONVERT_H
#define NB_TEST_CONVERT_H

/* Returns 0 on success; on failure fails the current cmocka test. `dtype_name` is
 * "F32", "F16" or "BF16" for the matrices (vectors stay F32). For model_type llama
 * the Q/K rows are permuted for interleaved RoPE, as llama.cpp's converter does. */
int tu_hf_to_gguf(const char *hf_dir, const char *out_path, const char *dtype_name);

#endif
