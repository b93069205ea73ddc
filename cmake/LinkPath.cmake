# attnkit_link_path(<target_path> <link>): makes <link> a symbolic link to <target_path> (a
# folder or a file), once. The layers' include folders (src/CMakeLists.txt) and the Python
# package assembled in the build tree (python/CMakeLists.txt) are made of such links.
function(attnkit_link_path target_path link)
  get_filename_component(parent ${link} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT IS_SYMLINK ${link})
    file(CREATE_LINK ${target_path} ${link} SYMBOLIC)
  endif()
endfunction()
