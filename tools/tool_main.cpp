// The entry point of each tool executable: the tool's main() is compiled under another name
// (tools/CMakeLists.txt) so that tests/cli's kiln_scan can link the same objects and call it.
int KILN_TOOL_MAIN(int argc, char** argv);

int main(int argc, char** argv) { return KILN_TOOL_MAIN(argc, argv); }
