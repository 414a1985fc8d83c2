"""Run by hand, not by CI: mutation testing of kernelpin's checks (`mutation`) and one stable-ABI build under several torch releases (`stable_abi_matrix`)."""
