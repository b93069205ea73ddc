# Embeds every models/*.json into the attnkit library, so that `--model gemma-3-1b-it`
# works with no file at hand. The generated source defines model_detail::embedded_models()
# (src/model/embedded_models.h); it is rebuilt whenever a config changes or one is added.
file(GLOB ATTNKIT_MODEL_CONFIGS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/models/*.json)
set(ATTNKIT_EMBEDDED_MODELS_CPP ${CMAKE_BINARY_DIR}/generated/attnkit/embedded_models.cpp)
add_custom_command(
  OUTPUT ${ATTNKIT_EMBEDDED_MODELS_CPP}
  COMMAND ${CMAKE_COMMAND} -DMODELS_DIR=${PROJECT_SOURCE_DIR}/models
          -DOUTPUT=${ATTNKIT_EMBEDDED_MODELS_CPP} -P ${PROJECT_SOURCE_DIR}/cmake/embed_models.cmake
  DEPENDS ${ATTNKIT_MODEL_CONFIGS} ${PROJECT_SOURCE_DIR}/cmake/embed_models.cmake
  COMMENT "Embedding model configs from models/"
  VERBATIM)
target_sources(attnkit_model PRIVATE ${ATTNKIT_EMBEDDED_MODELS_CPP})
